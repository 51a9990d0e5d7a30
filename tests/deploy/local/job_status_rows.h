// Rows of a scheduler's job status (pb::JobStatus) that the launcher's tests build by hand.
#ifndef SIEVE_TESTS_DEPLOY_LOCAL_JOB_STATUS_ROWS_H_
#define SIEVE_TESTS_DEPLOY_LOCAL_JOB_STATUS_ROWS_H_

#include <cstdint>

#include "proto/sieve.pb.h"

namespace sieve {

// Adds worker `rank`'s row to `st`, with a report of `round`.
inline void AddWorker(pb::JobStatus* st, int rank, uint64_t round) {
  pb::JobNode* n = st->add_nodes();
  n->set_role(pb::ROLE_WORKER);
  n->set_rank(rank);
  n->mutable_worker()->set_round(round);
}

}  // namespace sieve

#endif  // SIEVE_TESTS_DEPLOY_LOCAL_JOB_STATUS_ROWS_H_
