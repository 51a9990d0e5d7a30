#include <memory>
#include <string>

#include "kernels/model/model_layout.h"
#include "tests/worker/cpu_reference/cnn_model.h"
#include "tests/worker/cpu_reference/mlp_model.h"
#include "tests/worker/cpu_reference/model.h"

namespace sieve::cpu_reference {

StatusOr<std::unique_ptr<Model>> MakeModel(std::string_view name) {
  if (name == "synthetic") {
    return InvalidArgumentError(
        "'synthetic' has no model math: the worker generates its gradients itself");
  }
  StatusOr<ModelLayout> layout = MakeModelLayout(name);
  if (!layout.ok()) return layout.status();
  if (name == "cnn") return std::unique_ptr<Model>(new CnnModel(std::move(*layout)));
  return std::unique_ptr<Model>(new MlpModel(std::move(*layout)));
}

}  // namespace sieve::cpu_reference
