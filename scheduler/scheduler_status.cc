// The Scheduler's job status (scheduler.h): its reports, rows, progress and publication.
#include <algorithm>
#include <string>

#include "scheduler/scheduler.h"

namespace sieve {

void Scheduler::TakeReport(const Entry& from, const pb::Heartbeat& report) {
  Status s =
      reports_.Accept(from.info.id(), from.info.role(), from.info.instance(), report, Clock::now());
  if (s.ok()) return;
  reject_log_.Warn([&](std::ostream& os) {
    os << "refused the report of node " << from.info.id() << ": " << s.message();
  });
}

pb::JobStatus Scheduler::BuildStatus(pb::JobPhase phase) {
  const auto now = Clock::now();
  pb::JobStatus st;
  st.set_job(options_.job_name);
  st.set_instance(started_ ? job_instance_ : 0);
  st.set_phase(phase);
  st.set_num_servers(options_.num_servers);
  st.set_num_workers(options_.num_workers);
  st.set_num_params(num_params_);
  st.set_scheduler(transport_->host() + ":" + std::to_string(transport_->port()));
  st.set_elapsed_seconds(std::chrono::duration<double>(now - created_).count());
  st.set_replication(options_.replication);
  st.set_min_workers(options_.min_workers);
  st.set_reports_refused(reports_.refused());
  st.set_heartbeats(heartbeats_.load(std::memory_order_relaxed));
  st.set_foreign_messages(filter_.foreign());
  st.set_impostor_messages(filter_.impostors());
  if (phase == pb::JOB_FAILED) {
    pb::JobFailure* f = st.mutable_failure();
    f->set_node_id(failure_node_);
    f->set_rank(-1);
    if (const Entry* e = Find(failure_node_)) {
      f->set_role(e->info.role());
      f->set_rank(e->info.rank());
    }
    f->set_code(std::string(StatusCodeName(failure_.code())));
    f->set_message(failure_.message());
  }
  auto age_ms = [&](const Entry& e) {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(now - e.last_seen).count());
  };
  st.mutable_progress();  // present (all zeros) while forming too
  if (!started_) {
    for (const Entry& e : pending_) {
      if (e.info.role() == pb::ROLE_SERVER) {
        st.set_servers_registered(st.servers_registered() + 1);
      } else {
        st.set_workers_registered(st.workers_registered() + 1);
      }
      pb::JobNode* n = st.add_nodes();
      n->set_id(e.info.id());
      n->set_role(e.info.role());
      n->set_rank(e.info.rank());
      n->set_address(e.info.host() + ":" + std::to_string(e.info.port()));
      n->set_state(pb::NODE_REGISTERED);
      n->set_heartbeat_age_ms(age_ms(e));
    }
    std::stable_sort(
        st.mutable_nodes()->begin(), st.mutable_nodes()->end(),
        [](const pb::JobNode& a, const pb::JobNode& b) { return a.role() < b.role(); });
    return st;
  }
  st.set_servers_registered(options_.num_servers);
  st.set_workers_registered(options_.num_workers);
  std::vector<NodeReports::WorkerRow> rows;
  uint32_t finished = 0;
  for (const auto& [id, e] : nodes_) {  // by id: servers by rank, then workers by rank
    pb::JobNode* n = st.add_nodes();
    n->set_id(id);
    n->set_role(e.info.role());
    n->set_rank(e.info.rank());
    n->set_address(e.info.host() + ":" + std::to_string(e.info.port()));
    n->set_heartbeat_age_ms(age_ms(e));
    n->set_restarts(e.restarts);
    n->set_promotions(e.promotions);
    n->set_lost_reason(e.lost_reason);
    pb::NodeState state = e.restarts > 0 ? e.comeback : pb::NODE_ALIVE;
    if (e.info.role() == pb::ROLE_SERVER) {
      const int rank = e.info.rank();
      for (int shard = 0; shard < static_cast<int>(options_.num_servers); ++shard) {
        const int primary = shard_primary_.empty() ? shard : shard_primary_[shard];
        if (primary == rank) n->add_primary_shards(shard);
        if (shard < static_cast<int>(copies_.size()) &&
            std::find(copies_[shard].begin(), copies_[shard].end(), rank) != copies_[shard].end())
          n->add_backup_shards(shard);
      }
      if (!e.dead && std::any_of(n->primary_shards().begin(), n->primary_shards().end(),
                                 [rank](int s) { return s != rank; }))
        state = pb::NODE_PROMOTED;
      if (const pb::ServerReport* r = reports_.Server(id)) *n->mutable_server() = *r;
    } else {
      if (const pb::WorkerReport* r = reports_.Worker(id)) *n->mutable_worker() = *r;
      rows.push_back({id, e.info.rank(), !e.dead, e.finished});
      finished += e.finished;
      if (e.finished) state = pb::NODE_FINISHED;
    }
    if (e.dead) state = pb::NODE_LOST;
    n->set_state(state);
  }
  st.set_workers_finished(finished);
  *st.mutable_progress() = reports_.Progress(rows, now);
  return st;
}

void Scheduler::PublishStatus(pb::JobPhase phase, bool force) {
  const auto now = Clock::now();
  if (!force && now - last_status_ < std::chrono::milliseconds(250)) return;
  last_status_ = now;
  last_phase_ = phase;
  pb::JobStatus st = BuildStatus(phase);
  if (options_.on_status) options_.on_status(st);
  MutexLock lock(&status_mu_);
  status_ = std::move(st);
}

pb::JobStatus Scheduler::status() const {
  MutexLock lock(&status_mu_);
  return status_;
}

}  // namespace sieve
