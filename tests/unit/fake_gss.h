// A fake GSS-API mechanism for the RPCSEC_GSS tests (rpcsec_gss_test.cc,
// the client's side; rpcsec_gss_server_test.cc and callback_server_test.cc,
// the server's): contexts whose MICs and wrap tokens a test can compute
// and forge, and an acceptor that takes a scripted two-token handshake.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "rpc/rpcsec_gss.h"
#include "rpc/rpcsec_gss_server.h"

namespace nache {
namespace rpc {

// A mechanism with a key: the MIC of m is "mic:" and a hash of key and m;
// a wrap token is "wrap:" and m with every byte xor'ed with the key.
class FakeContext : public GssContext {
 public:
  explicit FakeContext(char key) : key_(key) {}
  static std::string Mic(char key, const std::string &m) {
    uint64_t h = 1469598103934665603ull ^ uint8_t(key);
    for (char c : m) h = (h ^ uint8_t(c)) * 1099511628211ull;
    return "mic:" + std::to_string(h);
  }
  static std::string WrapWith(char key, const std::string &m) {
    std::string t = "wrap:";
    for (char c : m) t += char(c ^ key);
    return t;
  }
  bool GetMic(const std::string &msg, std::string *mic) override {
    *mic = Mic(key_, msg);
    return true;
  }
  bool VerifyMic(const char *msg, size_t len, const char *mic,
                 size_t mic_len) override {
    return Mic(key_, std::string(msg, len)) == std::string(mic, mic_len);
  }
  bool Wrap(const std::string &msg, std::string *token) override {
    *token = WrapWith(key_, msg);
    return true;
  }
  bool Unwrap(const char *token, size_t len, std::string *msg) override {
    std::string t(token, len);
    if (t.compare(0, 5, "wrap:") != 0) return false;
    msg->clear();
    for (size_t i = 5; i < t.size(); i++) *msg += char(t[i] ^ key_);
    return true;
  }

 private:
  char key_;
};

// Accepts "tok1" (answering "srv1", continue) then "tok2" (answering
// "srv2", complete) as principal, with a FakeContext of key; any other
// token fails.
class FakeAcceptor : public GssAcceptor {
 public:
  FakeAcceptor(std::string principal, char key)
      : principal_(std::move(principal)), key_(key) {}
  Step Next(const std::string &in, std::string *out,
            std::string *err) override {
    if (step_ == 0 && in == "tok1") {
      step_ = 1;
      *out = "srv1";
      return Step::kContinue;
    }
    if (step_ == 1 && in == "tok2") {
      step_ = 2;
      *out = "srv2";
      return Step::kComplete;
    }
    out->clear();
    *err = "unexpected token";
    return Step::kFailed;
  }
  std::string peer() const override { return step_ == 2 ? principal_ : ""; }
  std::unique_ptr<GssContext> TakeContext() override {
    return std::unique_ptr<GssContext>(new FakeContext(key_));
  }

 private:
  const std::string principal_;
  const char key_;
  int step_ = 0;  // tokens taken
};

}  // namespace rpc
}  // namespace nache
