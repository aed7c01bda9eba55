// See gss_krb5.h.
#include "rpc/gss_krb5.h"

#include <gssapi/gssapi.h>
#include <gssapi/gssapi_ext.h>
#include <gssapi/gssapi_krb5.h>
#include <krb5/krb5.h>  // error codes, and a keytab's first principal

#include <limits>

#include "util/mutex.h"

namespace nache {
namespace rpc {

namespace {

// "what: major text; minor text", from the library's own messages.
std::string GssError(const char *what, OM_uint32 major, OM_uint32 minor) {
  std::string s = what;
  for (int pass = 0; pass < 2; pass++) {
    OM_uint32 code = pass == 0 ? major : minor;
    int type = pass == 0 ? GSS_C_GSS_CODE : GSS_C_MECH_CODE;
    if (pass == 1 && minor == 0) break;
    s += pass == 0 ? ": " : "; ";
    OM_uint32 ctx = 0, m;
    do {
      gss_buffer_desc text = GSS_C_EMPTY_BUFFER;
      if (GSS_ERROR(
              gss_display_status(&m, code, type, gss_mech_krb5, &ctx, &text)))
        break;
      s.append(static_cast<const char *>(text.value), text.length);
      gss_release_buffer(&m, &text);
    } while (ctx != 0);
  }
  return s;
}

// The KDC could not be reached, or did not answer in time: a later try
// may do better. (Minor statuses of the krb5 mechanism are krb5 error
// codes.)
bool TransientKdcFailure(OM_uint32 minor) {
  const auto code = static_cast<krb5_error_code>(minor);
  return code == KRB5_KDC_UNREACH || code == KRB5KDC_ERR_SVC_UNAVAILABLE ||
         code == KRB5_REALM_CANT_RESOLVE;
}

gss_buffer_desc Buffer(const char *p, size_t n) {
  gss_buffer_desc b;
  b.value = const_cast<char *>(p);
  b.length = n;
  return b;
}

// Takes the library's buffer into *out and releases it.
void Take(gss_buffer_desc *b, std::string *out) {
  OM_uint32 m;
  out->assign(static_cast<const char *>(b->value), b->length);
  gss_release_buffer(&m, b);
}

class Name {
 public:
  ~Name() {
    OM_uint32 m;
    if (name_ != GSS_C_NO_NAME) gss_release_name(&m, &name_);
  }
  // A '/' or '@' after the service says a full principal; "svc@host" is a
  // host-based service.
  bool Import(const std::string &s, bool hostbased_if_no_slash,
              std::string *err) {
    gss_OID type = GSS_KRB5_NT_PRINCIPAL_NAME;
    if (hostbased_if_no_slash && s.find('/') == std::string::npos)
      type = GSS_C_NT_HOSTBASED_SERVICE;
    gss_buffer_desc b = Buffer(s.data(), s.size());
    OM_uint32 major, minor;
    major = gss_import_name(&minor, &b, type, &name_);
    if (GSS_ERROR(major)) {
      *err = GssError(("name " + s).c_str(), major, minor);
      return false;
    }
    return true;
  }
  gss_name_t get() const { return name_; }

 private:
  gss_name_t name_ = GSS_C_NO_NAME;
};

class KrbContext : public GssContext {
 public:
  explicit KrbContext(gss_ctx_id_t ctx) : ctx_(ctx) {}
  ~KrbContext() override {
    OM_uint32 m;
    gss_delete_sec_context(&m, &ctx_, GSS_C_NO_BUFFER);
  }
  bool GetMic(const std::string &msg, std::string *mic) override {
    OM_uint32 minor;
    gss_buffer_desc in = Buffer(msg.data(), msg.size());
    gss_buffer_desc out = GSS_C_EMPTY_BUFFER;
    if (GSS_ERROR(gss_get_mic(&minor, ctx_, GSS_C_QOP_DEFAULT, &in, &out)))
      return false;
    Take(&out, mic);
    return true;
  }
  bool VerifyMic(const char *msg, size_t len, const char *mic,
                 size_t mic_len) override {
    OM_uint32 minor;
    gss_buffer_desc m = Buffer(msg, len), t = Buffer(mic, mic_len);
    // (No sequencing asked of the context: replies come in any order.)
    return gss_verify_mic(&minor, ctx_, &m, &t, nullptr) == GSS_S_COMPLETE;
  }
  bool Wrap(const std::string &msg, std::string *token) override {
    OM_uint32 minor;
    int conf = 0;
    gss_buffer_desc in = Buffer(msg.data(), msg.size());
    gss_buffer_desc out = GSS_C_EMPTY_BUFFER;
    if (GSS_ERROR(
            gss_wrap(&minor, ctx_, 1, GSS_C_QOP_DEFAULT, &in, &conf, &out)))
      return false;
    Take(&out, token);
    return conf != 0;  // never send a privacy call in clear
  }
  bool Unwrap(const char *token, size_t len, std::string *msg) override {
    OM_uint32 minor;
    int conf = 0;
    gss_buffer_desc in = Buffer(token, len);
    gss_buffer_desc out = GSS_C_EMPTY_BUFFER;
    if (gss_unwrap(&minor, ctx_, &in, &out, &conf, nullptr) != GSS_S_COMPLETE)
      return false;
    Take(&out, msg);
    return conf != 0;
  }

 private:
  gss_ctx_id_t ctx_;
};

class KrbInitiator : public GssInitiator {
 public:
  KrbInitiator(std::shared_ptr<const KrbCredentials> owner, gss_cred_id_t cred,
               gss_name_t target)
      : owner_(std::move(owner)), cred_(cred), target_(target) {}
  ~KrbInitiator() override {
    OM_uint32 m;
    if (ctx_ != GSS_C_NO_CONTEXT)
      gss_delete_sec_context(&m, &ctx_, GSS_C_NO_BUFFER);
  }
  Step Next(const std::string &in, std::string *out,
            std::string *err) override {
    OM_uint32 major, minor, flags = 0;
    gss_buffer_desc in_tok = Buffer(in.data(), in.size());
    gss_buffer_desc out_tok = GSS_C_EMPTY_BUFFER;
    // Mutual authentication, integrity and confidentiality; no sequencing
    // or replay detection: RPC replies come in any order, and RPCSEC_GSS
    // has its own sequence numbers.
    major = gss_init_sec_context(
        &minor, cred_, &ctx_, target_, gss_mech_krb5,
        GSS_C_MUTUAL_FLAG | GSS_C_INTEG_FLAG | GSS_C_CONF_FLAG, 0,
        GSS_C_NO_CHANNEL_BINDINGS, in.empty() ? GSS_C_NO_BUFFER : &in_tok,
        nullptr, &out_tok, &flags, nullptr);
    out->clear();
    if (out_tok.length) Take(&out_tok, out);
    if (GSS_ERROR(major)) {
      *err = GssError("gss_init_sec_context", major, minor);
      transient_ = TransientKdcFailure(minor);
      return Step::kFailed;
    }
    if (major & GSS_S_CONTINUE_NEEDED) return Step::kContinue;
    if (!(flags & GSS_C_CONF_FLAG) || !(flags & GSS_C_INTEG_FLAG)) {
      *err = "the context offers no integrity or no confidentiality";
      return Step::kFailed;
    }
    return Step::kComplete;
  }
  std::unique_ptr<GssContext> TakeContext() override {
    std::unique_ptr<GssContext> c(new KrbContext(ctx_));
    ctx_ = GSS_C_NO_CONTEXT;
    return c;
  }
  bool transient() const { return transient_; }

 private:
  std::shared_ptr<const KrbCredentials> owner_;  // keeps cred_ and target_
  gss_cred_id_t cred_;
  gss_name_t target_;
  gss_ctx_id_t ctx_ = GSS_C_NO_CONTEXT;
  bool transient_ = false;  // the last failure was the KDC's absence
};

// An initiator that cannot start: its credentials could not be had.
class FailedInitiator : public GssInitiator {
 public:
  explicit FailedInitiator(std::string why) : why_(std::move(why)) {}
  Step Next(const std::string &, std::string *out, std::string *err) override {
    out->clear();
    *err = why_;
    return Step::kFailed;
  }
  std::unique_ptr<GssContext> TakeContext() override { return nullptr; }

 private:
  const std::string why_;
};

// The first principal of a keytab ("nfs/box.example.org@REALM"; "" when
// it cannot be read): read from the file, no KDC asked.
std::string KeytabPrincipal(const std::string &keytab) {
  krb5_context ctx;
  if (krb5_init_context(&ctx)) return "";
  std::string out;
  krb5_keytab kt;
  if (!krb5_kt_resolve(ctx, ("FILE:" + keytab).c_str(), &kt)) {
    krb5_kt_cursor cursor;
    if (!krb5_kt_start_seq_get(ctx, kt, &cursor)) {
      krb5_keytab_entry entry;
      if (!krb5_kt_next_entry(ctx, kt, &entry, &cursor)) {
        char *name = nullptr;
        if (!krb5_unparse_name(ctx, entry.principal, &name)) {
          out = name;
          krb5_free_unparsed_name(ctx, name);
        }
        krb5_free_keytab_entry_contents(ctx, &entry);
      }
      krb5_kt_end_seq_get(ctx, kt, &cursor);
    }
    krb5_kt_close(ctx, kt);
  }
  krb5_free_context(ctx);
  return out;
}

class KrbCredentialsImpl
    : public KrbCredentials,
      public std::enable_shared_from_this<KrbCredentialsImpl> {
 public:
  ~KrbCredentialsImpl() override {
    OM_uint32 m;
    if (cred_ != GSS_C_NO_CREDENTIAL) gss_release_cred(&m, &cred_);
  }
  bool Init(const KrbOptions &o, std::string *err, std::string *deferred) {
    service_ = o.service;
    target_ = std::make_shared<Name>();
    if (!target_->Import(o.service, true, err)) return false;
    me_ = std::make_shared<Name>();
    if (!o.client_principal.empty() &&
        !me_->Import(o.client_principal, false, err))
      return false;
    // The keytab for the keys; tickets in a memory cache of ours.
    keytab_ = o.keytab;
    ccache_ = "MEMORY:" + o.ccache_name;
    bool transient = false;
    MutexLock lk(&cred_mu_);
    if (AcquireLocked(err, &transient)) {
      principal_ = CredName(cred_);
      return true;
    }
    // MIT gets a first ticket from the KDC now. Out of reach (a branch
    // box booting while the WAN is down), the export starts anyway: the
    // credentials are got at the first context (each connection attempt,
    // with the connection's backoff), calls fail retryably meanwhile.
    if (!transient) return false;
    principal_ = o.client_principal.empty() ? KeytabPrincipal(o.keytab)
                                            : o.client_principal;
    if (principal_.empty()) {
      *err += "; and the keytab names no principal";
      return false;
    }
    *deferred = *err;
    err->clear();
    return true;
  }
  std::unique_ptr<GssInitiator> NewInitiator() override {
    std::string why;
    gss_cred_id_t cred = Cred(&why, nullptr);
    if (cred == GSS_C_NO_CREDENTIAL)
      return std::unique_ptr<GssInitiator>(new FailedInitiator(why));
    return std::unique_ptr<GssInitiator>(
        new KrbInitiator(shared_from_this(), cred, target_->get()));
  }
  std::string principal() const override { return principal_; }
  TimePoint expires() const override { return expires_; }

  std::shared_ptr<KrbCredentials> Impersonate(const std::string &user,
                                              KrbError *err) override {
    const std::string what = "credentials for " + user;
    err->transient = false;
    if (impersonated_) {
      err->message = what + ": these are a user's already";
      return nullptr;
    }
    Name who;
    std::string why;
    if (!who.Import(user, false, &why)) {
      err->message = what + ": " + why;
      return nullptr;
    }
    gss_cred_id_t mine = Cred(&why, &err->transient);
    if (mine == GSS_C_NO_CREDENTIAL) {
      err->message = what + ": " + why;
      return nullptr;
    }
    gss_OID_set_desc mechs = {1, gss_mech_krb5};
    gss_cred_id_t cred = GSS_C_NO_CREDENTIAL;
    OM_uint32 major, minor, lifetime = 0;
    // S4U2Self: a ticket to ourselves as user (and our own TGT first, from
    // the keytab, when the one in our cache has expired).
    major = gss_acquire_cred_impersonate_name(
        &minor, mine, who.get(), GSS_C_INDEFINITE, &mechs, GSS_C_INITIATE,
        &cred, nullptr, &lifetime);
    if (GSS_ERROR(major)) {
      err->message = GssError(
          (what + " (S4U2Self as " + principal_ + ")").c_str(), major, minor);
      err->transient = TransientKdcFailure(minor);
      return nullptr;
    }
    auto c = std::make_shared<KrbCredentialsImpl>();
    {
      MutexLock lk(&c->cred_mu_);
      c->cred_ = cred;
    }
    c->target_ = target_;
    c->service_ = service_;
    c->principal_ = user;
    c->impersonated_ = true;
    c->expires_ =
        lifetime == GSS_C_INDEFINITE
            ? TimePoint::max()
            : std::chrono::steady_clock::now() + std::chrono::seconds(lifetime);
    // S4U2Proxy now, on this thread: the first token of a context needs
    // the service ticket, which the library then keeps in the user's
    // cache for the contexts to come.
    std::unique_ptr<GssInitiator> probe = c->NewInitiator();
    std::string token;
    if (probe->Next("", &token, &why) == GssInitiator::Step::kFailed) {
      err->message = what + " (S4U2Proxy to " + service_ + " as " + principal_ +
                     "): " + why;
      err->transient = static_cast<KrbInitiator *>(probe.get())->transient();
      return nullptr;
    }
    return c;
  }

 private:
  // The display form of a credential's principal ("" when unknown).
  static std::string CredName(gss_cred_id_t cred) {
    OM_uint32 major, minor, m;
    gss_name_t name = GSS_C_NO_NAME;
    major = gss_inquire_cred(&minor, cred, &name, nullptr, nullptr, nullptr);
    if (GSS_ERROR(major)) return "";
    gss_buffer_desc text = GSS_C_EMPTY_BUFFER;
    std::string out;
    if (!GSS_ERROR(gss_display_name(&minor, name, &text, nullptr)))
      Take(&text, &out);
    gss_release_name(&m, &name);
    return out;
  }

  // The library's credentials, got now if they were not at Init (the KDC
  // was out of reach then); GSS_C_NO_CREDENTIAL with *why (and
  // *transient: the KDC still out of reach) when they cannot be had.
  gss_cred_id_t Cred(std::string *why, bool *transient) EXCLUDES(cred_mu_) {
    MutexLock lk(&cred_mu_);
    bool kdc_away = false;
    if (cred_ == GSS_C_NO_CREDENTIAL && !AcquireLocked(why, &kdc_away)) {
      if (transient) *transient = kdc_away;
      return GSS_C_NO_CREDENTIAL;
    }
    return cred_;
  }
  // gss_acquire_cred_from on the keytab into our memory cache (MIT asks
  // the KDC for a first ticket); false with *why, *transient when the KDC
  // was out of reach.
  bool AcquireLocked(std::string *why, bool *transient) REQUIRES(cred_mu_) {
    gss_key_value_element_desc elems[2] = {{"client_keytab", keytab_.c_str()},
                                           {"ccache", ccache_.c_str()}};
    gss_key_value_set_desc store = {2, elems};
    gss_OID_set_desc mechs = {1, gss_mech_krb5};
    OM_uint32 major, minor;
    major =
        gss_acquire_cred_from(&minor, me_->get(), GSS_C_INDEFINITE, &mechs,
                              GSS_C_INITIATE, &store, &cred_, nullptr, nullptr);
    if (!GSS_ERROR(major)) return true;
    cred_ = GSS_C_NO_CREDENTIAL;
    *why = GssError(("keytab " + keytab_).c_str(), major, minor);
    *transient = TransientKdcFailure(minor);
    return false;
  }

  std::shared_ptr<Name> target_;  // the server's name (shared with users')
  std::string service_;           // as configured, for messages
  // The keytab's: the keytab, our memory cache, and the principal to be
  // (no name: the keytab's first), for a later acquisition.
  std::string keytab_, ccache_;
  std::shared_ptr<Name> me_;
  // Held across a lazy acquisition (a KDC exchange): whoever needs the
  // credentials waits for it, as none can do without them.
  Mutex cred_mu_{"gss_cred"};
  gss_cred_id_t cred_ GUARDED_BY(cred_mu_) = GSS_C_NO_CREDENTIAL;
  std::string principal_;      // who these credentials are
  bool impersonated_ = false;  // a user's, by Impersonate
  TimePoint expires_ = TimePoint::max();
};

class KrbAcceptor : public GssAcceptor {
 public:
  KrbAcceptor(std::shared_ptr<const KrbAcceptorCredentials> owner,
              gss_cred_id_t cred)
      : owner_(std::move(owner)), cred_(cred) {}
  ~KrbAcceptor() override {
    OM_uint32 m;
    if (ctx_ != GSS_C_NO_CONTEXT)
      gss_delete_sec_context(&m, &ctx_, GSS_C_NO_BUFFER);
  }
  Step Next(const std::string &in, std::string *out,
            std::string *err) override {
    OM_uint32 major, minor, m, flags = 0;
    gss_buffer_desc in_tok = Buffer(in.data(), in.size());
    gss_buffer_desc out_tok = GSS_C_EMPTY_BUFFER;
    gss_name_t src = GSS_C_NO_NAME;
    major = gss_accept_sec_context(&minor, &ctx_, cred_, &in_tok,
                                   GSS_C_NO_CHANNEL_BINDINGS, &src, nullptr,
                                   &out_tok, &flags, nullptr, nullptr);
    out->clear();
    if (out_tok.length) Take(&out_tok, out);
    if (GSS_ERROR(major)) {
      *err = GssError("gss_accept_sec_context", major, minor);
      if (src != GSS_C_NO_NAME) gss_release_name(&m, &src);
      return Step::kFailed;
    }
    if (src != GSS_C_NO_NAME) {
      gss_buffer_desc text = GSS_C_EMPTY_BUFFER;
      if (!GSS_ERROR(gss_display_name(&minor, src, &text, nullptr)))
        Take(&text, &peer_);
      gss_release_name(&m, &src);
    }
    if (major & GSS_S_CONTINUE_NEEDED) return Step::kContinue;
    if (!(flags & GSS_C_INTEG_FLAG)) {
      *err = "the context offers no integrity";
      return Step::kFailed;
    }
    return Step::kComplete;
  }
  std::string peer() const override { return peer_; }
  std::unique_ptr<GssContext> TakeContext() override {
    std::unique_ptr<GssContext> c(new KrbContext(ctx_));
    ctx_ = GSS_C_NO_CONTEXT;
    return c;
  }

 private:
  std::shared_ptr<const KrbAcceptorCredentials> owner_;  // keeps cred_
  gss_cred_id_t cred_;
  gss_ctx_id_t ctx_ = GSS_C_NO_CONTEXT;
  std::string peer_;  // the initiator's principal, once known
};

class KrbAcceptorCredentialsImpl
    : public KrbAcceptorCredentials,
      public std::enable_shared_from_this<KrbAcceptorCredentialsImpl> {
 public:
  ~KrbAcceptorCredentialsImpl() override {
    OM_uint32 m;
    if (cred_ != GSS_C_NO_CREDENTIAL) gss_release_cred(&m, &cred_);
  }
  bool Init(const std::string &keytab, const std::string &principal,
            std::string *err) {
    Name me;
    if (!principal.empty() && !me.Import(principal, false, err)) return false;
    gss_key_value_element_desc elems[1] = {{"keytab", keytab.c_str()}};
    gss_key_value_set_desc store = {1, elems};
    gss_OID_set_desc mechs = {1, gss_mech_krb5};
    OM_uint32 major, minor;
    major =
        gss_acquire_cred_from(&minor, me.get(), GSS_C_INDEFINITE, &mechs,
                              GSS_C_ACCEPT, &store, &cred_, nullptr, nullptr);
    if (!GSS_ERROR(major)) return true;
    cred_ = GSS_C_NO_CREDENTIAL;
    *err =
        GssError(("keytab " + keytab + " (to accept)").c_str(), major, minor);
    return false;
  }
  std::unique_ptr<GssAcceptor> NewAcceptor() override {
    return std::unique_ptr<GssAcceptor>(
        new KrbAcceptor(shared_from_this(), cred_));
  }

 private:
  gss_cred_id_t cred_ = GSS_C_NO_CREDENTIAL;  // set by Init, then read-only
};

}  // namespace

std::shared_ptr<KrbAcceptorCredentials> KrbAcceptorCredentials::Acquire(
    const std::string &keytab, const std::string &principal, std::string *err) {
  auto c = std::make_shared<KrbAcceptorCredentialsImpl>();
  if (!c->Init(keytab, principal, err)) return nullptr;
  return c;
}

std::shared_ptr<KrbCredentials> KrbCredentials::Acquire(const KrbOptions &o,
                                                        std::string *err,
                                                        std::string *deferred) {
  auto c = std::make_shared<KrbCredentialsImpl>();
  std::string later;
  if (!c->Init(o, err, &later)) return nullptr;
  if (deferred) *deferred = later;
  return c;
}

}  // namespace rpc
}  // namespace nache
