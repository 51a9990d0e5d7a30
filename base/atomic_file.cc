#include "base/atomic_file.h"

#include "base/staged_file.h"

namespace sieve {

Status WriteFileAtomically(const std::string& path, std::string_view content) {
  SIEVE_ASSIGN_OR_RETURN(auto file, StagedFile::Create(path));
  SIEVE_RETURN_IF_ERROR(file->Append(content));
  return file->Commit();
}

}  // namespace sieve
