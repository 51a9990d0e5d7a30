#include <memory>
#include <string>

#include "kernels/model/model_layout.h"
#include "worker/model/cnn_model.h"
#include "worker/model/mlp_model.h"
#include "worker/model/model.h"

namespace sieve {

StatusOr<std::unique_ptr<Model>> MakeModel(std::string_view name, Device device) {
  if (name == "synthetic") {
    return InvalidArgumentError(
        "'synthetic' has no model math: the worker generates its gradients itself");
  }
  SIEVE_ASSIGN_OR_RETURN(ModelLayout layout, MakeModelLayout(name));
  SIEVE_ASSIGN_OR_RETURN(std::unique_ptr<NnOps> ops, NnOps::Create(device));
  if (layout.Find("conv1.weight") != nullptr) {
    return std::unique_ptr<Model>(new CnnModel(std::move(layout), std::move(ops)));
  }
  return std::unique_ptr<Model>(new MlpModel(std::move(layout), std::move(ops)));
}

}  // namespace sieve
