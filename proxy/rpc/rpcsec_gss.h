// RPCSEC_GSS version 1, the client's side (RFC 2203): a call's credential
// and verifier, the integrity and privacy wrapping of its arguments and
// results, and the context-creation calls (RPCSEC_GSS_INIT and
// _CONTINUE_INIT) with their results.
//
// The GSS-API mechanism is behind two small interfaces, GssContext (the
// per-message calls of an established context) and GssInitiator (context
// establishment), so that this file is only the RPC protocol: gss_krb5.h
// implements them with MIT Kerberos, and the unit tests with a fake.
//
// Thread safety: none. One connection's loop thread owns an RpcsecGss
// (the transport seals and opens its calls there).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "rpc/rpc_transport.h"

namespace nache {
namespace rpc {

// RFC 2203's numbers (the flavour's, kAuthRpcsecGss: rpc_transport.h).
enum class GssProc : uint32_t {
  kData = 0,
  kInit = 1,
  kContinueInit = 2,
  kDestroy = 3
};
enum class GssService : uint32_t { kNone = 1, kIntegrity = 2, kPrivacy = 3 };
// auth_stat of an AUTH_ERROR refusing a context (RFC 2203 5.3.3.3): the
// server no longer has it (or the credential in it expired).
constexpr uint32_t kRpcsecGssCredProblem = 13, kRpcsecGssCtxProblem = 14;
// Sequence numbers stop below this (RFC 2203 5.3.3.1): a new context then.
constexpr uint32_t kRpcsecGssMaxSeq = 0x80000000u;
// GSS-API major statuses the server reports in rpc_gss_init_res.
constexpr uint32_t kGssComplete = 0, kGssContinueNeeded = 1;

// "krb5", "krb5i", "krb5p" and their services; false for anything else.
bool ParseGssService(const std::string &flavor, GssService *out);
const char *GssServiceName(GssService s);

// An established GSS-API context's per-message calls.
class GssContext {
 public:
  virtual ~GssContext() = default;
  virtual bool GetMic(const std::string &msg, std::string *mic) = 0;
  virtual bool VerifyMic(const char *msg, size_t len, const char *mic,
                         size_t mic_len) = 0;
  // Wrap with confidentiality; Unwrap fails unless the token was.
  virtual bool Wrap(const std::string &msg, std::string *token) = 0;
  virtual bool Unwrap(const char *token, size_t len, std::string *msg) = 0;
};

// Context establishment, token by token (GSS_Init_sec_context).
class GssInitiator {
 public:
  enum class Step { kContinue, kComplete, kFailed };
  virtual ~GssInitiator() = default;
  // in: the server's last token (empty at first). *out: the token to send
  // (may be empty once complete). kFailed: *err says why.
  virtual Step Next(const std::string &in, std::string *out,
                    std::string *err) = 0;
  // Once Next said kComplete: the context (moved out, once).
  virtual std::unique_ptr<GssContext> TakeContext() = 0;
};

// Credentials a context is made on: each establishment gets an initiator
// of its own. Thread safety: NewInitiator may be called from any thread;
// each initiator belongs to the thread that drives it.
class GssCredentials {
 public:
  virtual ~GssCredentials() = default;
  virtual std::unique_ptr<GssInitiator> NewInitiator() = 0;
};

// One context-creation call: its credential (INIT, or CONTINUE_INIT with
// the handle the server gave), an AUTH_NONE verifier and the token as the
// arguments; the results (rpc_gss_init_res) and the reply's verifier are
// kept for Finish.
class GssInitCall : public CallSecurity {
 public:
  explicit GssInitCall(std::string handle) : handle_(std::move(handle)) {}
  bool PutCredVerf(std::string *rec, size_t hdr, uint32_t *seq) override;
  bool PutArgs(uint32_t seq, const Transport::EncodeFn &encode,
               std::string *rec) override;
  bool OpenReply(uint32_t seq, uint32_t verf_flavor, const char *verf,
                 uint32_t verf_len, XdrIn *results,
                 std::string *plain) override;
  const std::string &verifier() const { return verf_; }

 private:
  std::string handle_;  // empty: RPCSEC_GSS_INIT
  std::string verf_;    // the reply's verifier body (RPCSEC_GSS only)
};

// rpc_gss_init_res.
struct GssInitRes {
  std::string handle;
  uint32_t major = 0, minor = 0;
  uint32_t window = 0;
  std::string token;
};
bool DecodeGssInitRes(XdrIn *in, GssInitRes *out);

// An established context at a server: the credential and verifier of each
// data call, its arguments and results sealed per service, the reply's
// verifier checked against the call's sequence number.
class RpcsecGss : public CallSecurity {
 public:
  RpcsecGss(std::unique_ptr<GssContext> ctx, std::string handle,
            uint32_t window, GssService service);
  // The final INIT reply's verifier must be the MIC of the window (RFC
  // 2203 5.2.3.1): proves the server holds the context.
  bool CheckWindowVerifier(const std::string &verf);

  bool PutCredVerf(std::string *rec, size_t hdr, uint32_t *seq) override;
  bool PutArgs(uint32_t seq, const Transport::EncodeFn &encode,
               std::string *rec) override;
  bool OpenReply(uint32_t seq, uint32_t verf_flavor, const char *verf,
                 uint32_t verf_len, XdrIn *results,
                 std::string *plain) override;
  void Refused(uint32_t auth_stat) override;

  // The server refused the context (it expired or was lost) or its
  // sequence numbers ran out: a new one is needed.
  bool expired() const { return expired_; }
  uint32_t window() const { return window_; }
  GssService service() const { return service_; }
  const std::string &handle() const { return handle_; }

 private:
  std::unique_ptr<GssContext> ctx_;
  const std::string handle_;
  const uint32_t window_;
  const GssService service_;
  uint32_t next_seq_ = 1;
  bool expired_ = false;
};

}  // namespace rpc
}  // namespace nache
