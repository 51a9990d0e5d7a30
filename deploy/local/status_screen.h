// StatusScreen: a job status (JobStatus, sieve.proto) as one screen for a person, what
// `sieve status` prints:
//   job sieve  RUNNING  12.9s  scheduler 127.0.0.1:9310  D 199210
//   [##########..............................]  27%
//   epoch 3/10 round 5000/18740 27% loss 0.4321 52.3 rounds/s pushed 12.3 MB ETA 4m23s
//   test accuracy 0.8512  pulled 25.1 MB  heartbeats 120
//   ROLE    RANK  STATE     ADDRESS               HEARD  ROUND        LOSS    DETAIL
//   server  0     ALIVE     127.0.0.1:40001        0.4s  822          -       applied 1644 ...
//   worker  1     LOST      127.0.0.1:40007       12.0s  700          0.4120  no heartbeat ...
// The bar is left out when the total is unknown; a failed job adds "FAILED: CODE node: MESSAGE"
// under the first line. Rows are the status's order (servers, then workers, by rank); each line
// is cut to `width` characters (0 = no limit). Pure function; thread-safe.
#ifndef SIEVE_DEPLOY_LOCAL_STATUS_SCREEN_H_
#define SIEVE_DEPLOY_LOCAL_STATUS_SCREEN_H_

#include <cstddef>
#include <string>

#include "proto/sieve.pb.h"

namespace sieve {

std::string StatusScreen(const pb::JobStatus& status, size_t width);

}  // namespace sieve

#endif  // SIEVE_DEPLOY_LOCAL_STATUS_SCREEN_H_
