// The NFSv4.0 callback service (RFC 7530 section 16): the TCP endpoint we
// advertise in SETCLIENTID, on which the upstream server calls us back with
// CB_NULL and CB_COMPOUND (CB_GETATTR, CB_RECALL).
//
// One service thread owns the listening socket, every accepted connection and
// its libnfs server rpc_context: it accepts (closing peers that are not
// allowed), decodes calls, asks the CallbackHandler and replies. The handler
// runs on that thread and must not block. Other threads only Start()/Stop()
// the service and read its counters. libnfs' headers stay in the .cc.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rpc/xdr.h"
#include "upstream/types.h"

struct rpc_context;
struct rpc_msg;

namespace nache {
namespace callback {

struct CallbackOptions {
  std::string address;            // IPv4 address to listen on ("0.0.0.0" ok)
  uint16_t port = 0;              // 0: an ephemeral port (tests)
  uint32_t program = 0x40000000;  // the program we advertise in SETCLIENTID
  // The callback_ident we gave in SETCLIENTID. A CB_COMPOUND carrying another
  // one is meant for a client incarnation that is not us: RFC 7530 16.2.3
  // names no error for it, so its first op is answered as a client holding no
  // such state answers (CB_RECALL: NFS4ERR_BAD_STATEID, CB_GETATTR:
  // NFS4ERR_BADHANDLE) without asking the handler.
  uint32_t callback_ident = 1;
  // IPv4 addresses allowed to connect; a connection from any other address is
  // closed at accept and counted in rejected(). Empty: everyone is allowed
  // (tests). To allow no one, list an address no peer has, e.g. "0.0.0.0".
  std::vector<std::string> allowed_peers;
};

class CallbackHandler {
 public:
  virtual ~CallbackHandler() = default;
  // Any call from an allowed peer arrived (CB_NULL included): the callback
  // path works.
  virtual void OnContact() = 0;
  // CB_RECALL. Runs on the callback thread and must not block: the handler
  // queues the work and returns a status for the op (NFS4_OK normally;
  // NFS4ERR_BADHANDLE / NFS4ERR_BAD_STATEID when it holds no such
  // delegation).
  virtual uint32_t OnRecall(const upstream::StateId &stateid, bool truncate,
                            const upstream::Fh &fh) = 0;
  // CB_GETATTR. Fills our view of the file's change attribute and size
  // (including data not yet written upstream). Returns NFS4_OK or an error
  // (e.g. NFS4ERR_BADHANDLE). Must not block.
  virtual uint32_t OnGetattr(const upstream::Fh &fh, uint64_t *change,
                             uint64_t *size) = 0;
};

// CB_GETATTR, in both minor versions (this service and the NFSv4.1 back
// channel): the requested bitmap4, of which only word 0 is kept (it holds
// all we serve); and the answer: of what word0 asks, the attributes we
// serve (change, size), as the mask returned and their values, XDR in bit
// order, in *vals.
bool ReadBitmapWord0(rpc::XdrIn *in, uint32_t *word0);
uint32_t CbGetattrAnswer(uint32_t word0, uint64_t change, uint64_t size,
                         std::string *vals);

class CallbackServer {
 public:
  // Binds, listens and starts the service thread. On failure returns null
  // and a reason in *err (e.g. "bind 10.0.0.1:4045: Address already in use").
  static std::unique_ptr<CallbackServer> Start(const CallbackOptions &opts,
                                               CallbackHandler *handler,
                                               std::string *err);
  ~CallbackServer();  // Stop()
  CallbackServer(const CallbackServer &) = delete;
  CallbackServer &operator=(const CallbackServer &) = delete;

  // Closes the listener and every connection and joins the service thread;
  // idempotent. Must not be called from the handler (it joins).
  void Stop();
  uint16_t port() const { return port_; }  // the bound port
  // RFC 5665 universal address "a.b.c.d.p1.p2" of address:port.
  std::string uaddr() const;
  uint64_t calls() const { return calls_.load(); }        // RPC calls served
  uint64_t rejected() const { return rejected_.load(); }  // peers refused

 private:
  struct Conn {
    struct rpc_context *rpc;  // libnfs server context; owns the socket
    std::string peer;         // "a.b.c.d:port", for logs
  };

  CallbackServer(const CallbackOptions &opts, CallbackHandler *handler);
  void Loop();
  void AcceptAll();
  bool Allowed(uint32_t addr) const;
  // libnfs service procedures; they find the server through a thread_local
  // set by Loop() (libnfs 4.0.0 passes them no user pointer).
  static int ServeNull(struct rpc_context *rpc, struct rpc_msg *call);
  static int ServeCompound(struct rpc_context *rpc, struct rpc_msg *call);

  const CallbackOptions opts_;         // as given to Start()
  CallbackHandler *const handler_;     // outlives us; called on the thread
  std::string address_;                // opts_.address, normalized
  std::vector<uint32_t> allowed_;      // allowed peers (network order)
  uint16_t port_ = 0;                  // bound port; set before the thread
  int listen_fd_ = -1;                 // closed by Stop() after the join
  int wake_fd_ = -1;                   // eventfd: Stop() wakes the loop
  std::mutex stop_mu_;                 // serializes Stop()
  std::thread thread_;                 // the service thread; under stop_mu_
  std::atomic<uint64_t> calls_{0};     // written by the thread only
  std::atomic<uint64_t> rejected_{0};  // written by the thread only
  std::vector<Conn> conns_;            // service thread only
};

}  // namespace callback
}  // namespace nache
