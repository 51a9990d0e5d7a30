// Node ids on the wire (Header.sender, NodeInfo.id): the one numbering every process uses.
//
// Contract: the scheduler is id 0; server rank r (0 <= r < S) is id 1 + r; worker rank r
// (0 <= r < W) is id 1 + S + r, where S is the job's number of servers. The scheduler assigns
// ids this way when the job forms and every node derives peers' ids from ranks the same way.
// Pure constexpr functions; they do not check ranks against S or W (callers validate peers'
// values before trusting them).
#ifndef SIEVE_PROTO_NODE_IDS_H_
#define SIEVE_PROTO_NODE_IDS_H_

namespace sieve {

inline constexpr int kSchedulerId = 0;

constexpr int ServerNodeId(int rank) { return 1 + rank; }
constexpr int WorkerNodeId(int num_servers, int rank) { return 1 + num_servers + rank; }
// The worker rank of node `id` (negative or >= W when `id` is not a worker's).
constexpr int WorkerRankOfNode(int num_servers, int id) { return id - 1 - num_servers; }

}  // namespace sieve

#endif  // SIEVE_PROTO_NODE_IDS_H_
