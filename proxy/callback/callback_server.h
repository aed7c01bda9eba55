// The NFSv4.0 callback service (RFC 7530 section 16): the TCP endpoint we
// advertise in SETCLIENTID, on which the upstream server calls us back with
// CB_NULL and CB_COMPOUND (CB_GETATTR, CB_RECALL).
//
// One service thread owns the listening socket and every accepted
// connection, each an rpc::Transport (our own ONC RPC: record marking
// bounded, call header and credentials read by our bounded reader; nothing
// of the peer's reaches libnfs): it accepts (closing peers that are not
// allowed, and connections beyond max_connections), serves calls through the
// transport's call handler, asks the CallbackHandler and replies. A
// connection that breaks the protocol (a record over the bound, a message
// that is neither call nor reply) is closed alone. The handler runs on that
// thread and must not block. Other threads only Start()/Stop() the service
// and read its counters.
//
// Security: as the remote calls us back under the flavour of our
// SETCLIENTID, the service accepts either AUTH_SYS and AUTH_NONE (a remote
// spoken to with AUTH_SYS), or only RPCSEC_GSS (CallbackOptions::gss set:
// a Kerberos remote), whose contexts rpc::GssServer makes and checks; a
// call under another flavour is then refused (AUTH_ERROR, AUTH_TOOWEAK).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "callback/cb_ops.h"
#include "rpc/rpc_transport.h"
#include "rpc/rpcsec_gss_server.h"
#include "rpc/xdr.h"
#include "util/mutex.h"

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
  // Connections kept at once; one more is closed at accept.
  size_t max_connections = 64;
  // RPCSEC_GSS only, with these contexts (gss.new_acceptor set: the
  // remote is spoken to under Kerberos); unset: AUTH_SYS and AUTH_NONE.
  rpc::GssServerOptions gss;
};

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
  // Calls to our program and version (those the handler sees).
  uint64_t calls() const { return calls_.load(); }
  uint64_t rejected() const { return rejected_.load(); }  // peers refused
  // Calls refused for their flavour (not RPCSEC_GSS while gss is set).
  uint64_t weak_calls() const { return weak_calls_.load(); }
  // The RPCSEC_GSS side (gss set), else null; its counters may be read.
  const rpc::GssServer *gss() const { return gss_.get(); }

 private:
  struct Conn {
    std::unique_ptr<rpc::Transport> rpc;  // owns the socket
    std::string peer;                     // "a.b.c.d:port", for logs
  };

  CallbackServer(const CallbackOptions &opts, CallbackHandler *handler);
  void Loop();
  void AcceptAll();
  bool Allowed(uint32_t addr) const;
  // The transport's call handler for a connection from peer.
  rpc::ReplyStatus Serve(const std::string &peer, const rpc::PeerCall &call,
                         rpc::XdrIn *args, std::string *results);
  rpc::ReplyStatus ServeCompound(const std::string &peer, rpc::XdrIn *args,
                                 std::string *results);

  const CallbackOptions opts_;      // as given to Start()
  CallbackHandler *const handler_;  // outlives us; called on the thread
  std::string address_;             // opts_.address, normalized
  std::vector<uint32_t> allowed_;   // allowed peers (network order)
  uint16_t port_ = 0;               // bound port; set before the thread
  int listen_fd_ = -1;              // closed by Stop() after the join
  int wake_fd_ = -1;                // eventfd: Stop() wakes the loop
  Mutex stop_mu_{"callback_stop"};  // serializes Stop()
  std::thread thread_ GUARDED_BY(stop_mu_);  // the service thread
  std::atomic<uint64_t> calls_{0};           // written by the thread only
  std::atomic<uint64_t> rejected_{0};        // written by the thread only
  std::atomic<uint64_t> weak_calls_{0};      // written by the thread only
  // Set before the thread starts (opts_.gss), then the thread's only.
  std::unique_ptr<rpc::GssServer> gss_;
  std::vector<Conn> conns_;  // service thread only
};

}  // namespace callback
}  // namespace nache
