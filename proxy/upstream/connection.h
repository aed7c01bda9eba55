// Internal to upstream/: one TCP connection to the upstream server, driven by
// its own event-loop thread.
//
// The loop thread owns the libnfs rpc_context outright (libnfs 4.0.0 is not
// thread-safe): it connects (non-blocking, with a connect timeout), encodes
// and queues every call (setting the call's AUTH_SYS credential right before
// the PDU is allocated), polls the socket and an eventfd, decodes replies,
// times calls out, and on failure drops the context, fails what was in
// flight with kDisconnected, and reconnects with exponential backoff
// (100 ms .. 5 s). It never resends: a COMPOUND may not be idempotent.
//
// Other threads only call Submit() (a mutex-protected queue plus an eventfd
// wake-up) and read the atomics behind connected() and load().
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "upstream/compound.h"
#include "upstream/types.h"
#include "upstream/upstream.h"

struct rpc_context;

namespace nache {
namespace upstream {

// The one retry policy of the upstream client: reconnects and client-id
// re-establishment back off exponentially between these bounds.
constexpr int kMinBackoffMs = 100;
constexpr int kMaxBackoffMs = 5000;


using Clock = std::chrono::steady_clock;

class Connection;

// One call on its way through a connection. Created by the caller's thread,
// then owned by the connection: by its submit queue, then by its loop thread.
// Once sent, libnfs holds a raw pointer to it (the PDU's private data) until
// the PDU's callback runs or the context is destroyed, so it outlives its own
// completion when a call times out.
struct PendingCall {
  Compound *compound = nullptr;         // the operations (owned or caller's)
  std::unique_ptr<Compound> owned;      // CallAsync's moved-in Compound
  Creds creds;                          // AUTH_SYS identity of this call
  Upstream::Callback done;              // completion; runs exactly once
  Clock::time_point deadline;           // completes kTimeout after this
  bool has_preset = false;              // complete with preset, never send
  CallStatus preset = CallStatus::kOk;  // the status to complete with
  // Loop thread only:
  bool completed = false;               // done has run
  Clock::time_point sent_at;            // when it was queued in libnfs
  Connection *conn = nullptr;           // the connection that sent it
  std::string rpc_error;                // libnfs' message for a failed RPC
};

// Told about connection state changes, on the connection's loop thread.
class ConnectionListener {
 public:
  virtual ~ConnectionListener() = default;
  virtual void OnConnectionUp(int index) = 0;
  virtual void OnConnectionDown(int index) = 0;
};

class Connection {
 public:
  Connection(int index, const UpstreamOptions &opts,
             ConnectionListener *listener);
  ~Connection();  // Stop()s if still running
  Connection(const Connection &) = delete;
  Connection &operator=(const Connection &) = delete;

  // Starts the loop thread, which connects in the background.
  void Start();
  // Stops the loop: everything queued or in flight completes kShutdown.
  // Must not be called from a loop thread (it joins).
  void Stop();

  // Hands a call to the loop. Thread-safe. The call completes on the loop
  // thread (with kDisconnected if the connection is not up when the loop
  // picks it up), or inline with kShutdown once the connection is stopped.
  void Submit(std::unique_ptr<PendingCall> call);

  int index() const { return index_; }
  bool connected() const { return connected_.load(std::memory_order_acquire); }
  // Calls submitted and not yet completed (for least-loaded dispatch).
  int load() const { return load_.load(std::memory_order_relaxed); }

 private:
  enum class Phase { kIdle, kConnecting, kUp, kBackoff };

  void Loop();
  void StartConnect();
  static void ConnectCb(struct rpc_context *rpc, int status, void *data,
                        void *private_data);
  void OnConnect(int status, const char *error);
  void DrainSubmissions();
  void Send(std::unique_ptr<PendingCall> call);
  void ApplyCreds(const Creds &creds);
  void ServiceSocket(int revents);
  static void ReplyCb(struct rpc_context *rpc, int status, void *data,
                      void *private_data);
  void OnReply(PendingCall *call, int status, void *data);
  void ClassifyFailedRpcs();
  void ExpireCalls(Clock::time_point now);
  int PollTimeoutMs(Clock::time_point now) const;
  // Drops the context, completing everything it held with status, and
  // schedules a reconnect after the current backoff.
  void Disconnect(const std::string &why, CallStatus status);
  void Complete(PendingCall *call, CallStatus status, CompoundReply &&reply);

  const int index_;                  // position in the pool, for logs
  const UpstreamOptions opts_;       // server, timeouts, auth machine name
  ConnectionListener *const listener_;  // the Upstream (outlives us)
  int wake_fd_ = -1;                 // eventfd: Submit() and Stop() wake-ups
  std::thread thread_;               // the loop

  std::mutex mu_;                                    // guards the two below
  std::deque<std::unique_ptr<PendingCall>> submitted_;  // not yet seen by loop
  bool stopping_ = false;                            // Stop() was called

  std::atomic<bool> connected_{false};  // phase_ == kUp, for dispatchers
  std::atomic<int> load_{0};            // submitted and not completed

  // Loop thread only.
  struct rpc_context *rpc_ = nullptr;  // current context; null when down
  Phase phase_ = Phase::kIdle;         // connection state machine
  Clock::time_point phase_deadline_;   // connect timeout / end of backoff
  int backoff_ms_ = 100;               // next reconnect delay
  bool tearing_down_ = false;          // inside Disconnect(): ignore callbacks
  std::unordered_set<PendingCall *> in_libnfs_;  // sent; deleted by ReplyCb
                                                 // or by Disconnect()
  std::vector<std::unique_ptr<PendingCall>> failed_rpcs_;  // RPC-level
                                         // failures, classified after service
  bool have_auth_ = false;             // the context has last_creds_ set
  Creds last_creds_;                   // the credential rpc_ encodes with
  Clock::time_point last_reply_;       // last reply of any kind on rpc_
};

}  // namespace upstream
}  // namespace nache
