#include <pmix.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "rendezvous/pmix.h"

namespace fanout {

namespace {

// One PMIx client session per process, finalized at exit.
class PmixClient {
 public:
  static PmixClient* get() {
    static PmixClient* client = [] () -> PmixClient* {
      if (!std::getenv("PMIX_RANK") && !std::getenv("PMIX_NAMESPACE")) return nullptr;
      static PmixClient c;
      return c.ok_ ? &c : nullptr;
    }();
    return client;
  }
  const pmix_proc_t& me() const { return me_; }
  pmix_proc_t wildcard() const {
    pmix_proc_t w;
    PMIX_PROC_CONSTRUCT(&w);
    PMIX_LOAD_PROCID(&w, me_.nspace, PMIX_RANK_WILDCARD);
    return w;
  }
  // A value of this process (or the job, with wildcard) as an unsigned integer; fallback when absent.
  uint64_t uint_of(const pmix_proc_t& proc, const char* key, uint64_t fallback) {
    pmix_value_t* v = nullptr;
    if (PMIx_Get(&proc, key, nullptr, 0, &v) != PMIX_SUCCESS || !v) return fallback;
    uint64_t out = fallback;
    switch (v->type) {
      case PMIX_UINT32: out = v->data.uint32; break;
      case PMIX_UINT16: out = v->data.uint16; break;
      case PMIX_PROC_RANK: out = v->data.rank; break;
      case PMIX_UINT64: out = v->data.uint64; break;
      case PMIX_INT: out = uint64_t(v->data.integer); break;
      default: break;
    }
    PMIX_VALUE_RELEASE(v);
    return out;
  }
  ~PmixClient() {
    if (ok_) PMIx_Finalize(nullptr, 0);
  }

 private:
  PmixClient() { ok_ = PMIx_Init(&me_, nullptr, 0) == PMIX_SUCCESS; }
  pmix_proc_t me_{};
  bool ok_ = false;
};

std::string pmix_error(const char* what, pmix_status_t rc) { return std::string(what) + ": " + PMIx_Error_string(rc); }

class PmixRendezvous : public Rendezvous {
 public:
  explicit PmixRendezvous(PmixClient* c) : c_(c) {}
  std::string name() const override { return "pmix"; }

  std::string put(const std::string& key, const std::string& value) override {
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = const_cast<char*>(value.data());
    v.data.bo.size = value.size();
    if (pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &v); rc != PMIX_SUCCESS) return pmix_error("PMIx_Put", rc);
    if (pmix_status_t rc = PMIx_Commit(); rc != PMIX_SUCCESS) return pmix_error("PMIx_Commit", rc);
    return "";
  }

  // The owner of a key is not known, so each rank's copy is looked up locally (PMIX_OPTIONAL: no remote
  // request); peers' keys arrive with a fence, so this waits for one until the timeout.
  std::string get(const std::string& key, int timeout_ms, std::string& value) override {
    const uint32_t size = uint32_t(c_->uint_of(c_->wildcard(), PMIX_JOB_SIZE, 1));
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    pmix_info_t info;
    bool optional = true;
    PMIX_INFO_CONSTRUCT(&info);
    PMIX_INFO_LOAD(&info, PMIX_OPTIONAL, &optional, PMIX_BOOL);
    for (;;) {
      for (uint32_t r = 0; r < size; ++r) {
        pmix_proc_t p;
        PMIX_PROC_CONSTRUCT(&p);
        PMIX_LOAD_PROCID(&p, c_->me().nspace, r);
        pmix_value_t* v = nullptr;
        if (PMIx_Get(&p, key.c_str(), &info, 1, &v) == PMIX_SUCCESS && v) {
          if (v->type == PMIX_BYTE_OBJECT) value.assign(v->data.bo.bytes, v->data.bo.size);
          else if (v->type == PMIX_STRING) value = v->data.string;
          PMIX_VALUE_RELEASE(v);
          PMIX_INFO_DESTRUCT(&info);
          return "";
        }
      }
      if (std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    PMIX_INFO_DESTRUCT(&info);
    return "timeout (key '" + key + "' not visible through PMIx; peers' keys appear after a fence)";
  }

  // PMIX_TIMEOUT is the server's to enforce, and a server that lost a peer (slurmstepd: "pmixp_read_buf:
  // Connection reset by peer", seen under load) never answers: a blocking PMIx_Fence then hung the rank until the
  // job's wall time. The fence is non-blocking and waited for here, so the timeout holds whatever the server does.
  std::string fence(int timeout_ms) override {
    struct Pending {  // shared with the callback, which may come after we gave up waiting (or never)
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      pmix_status_t rc = PMIX_SUCCESS;
      pmix_info_t info[2];
      pmix_proc_t proc;
      bool collect = true;
      int timeout_s = 1;
    };
    auto pending = std::make_shared<Pending>();
    pending->timeout_s = std::max(1, timeout_ms / 1000);
    PMIX_INFO_CONSTRUCT(&pending->info[0]);
    PMIX_INFO_LOAD(&pending->info[0], PMIX_COLLECT_DATA, &pending->collect, PMIX_BOOL);
    PMIX_INFO_CONSTRUCT(&pending->info[1]);
    PMIX_INFO_LOAD(&pending->info[1], PMIX_TIMEOUT, &pending->timeout_s, PMIX_INT);
    pending->proc = c_->wildcard();
    auto* keep = new std::shared_ptr<Pending>(pending);  // released by the callback
    pmix_status_t rc = PMIx_Fence_nb(&pending->proc, 1, pending->info, 2, [](pmix_status_t status, void* cbdata) {
      auto* p = static_cast<std::shared_ptr<Pending>*>(cbdata);
      {
        std::lock_guard<std::mutex> lock((*p)->mu);
        (*p)->rc = status;
        (*p)->done = true;
      }
      (*p)->cv.notify_all();
      delete p;
    }, keep);
    if (rc != PMIX_SUCCESS) {
      delete keep;  // no callback will come: done at once, or refused
      return rc == PMIX_OPERATION_SUCCEEDED ? "" : pmix_error("PMIx_Fence_nb", rc);
    }
    std::unique_lock<std::mutex> lock(pending->mu);
    if (!pending->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms) + std::chrono::seconds(1), [&] { return pending->done; }))
      return "timeout: the PMIx fence did not complete in " + std::to_string(timeout_ms) + " ms (a peer or the PMIx server is gone)";
    return pending->rc == PMIX_SUCCESS ? "" : pmix_error("PMIx_Fence", pending->rc);
  }

 private:
  PmixClient* c_;
};

}  // namespace

bool pmix_compiled_in() { return true; }

std::optional<RankPlace> pmix_place() {
  PmixClient* c = PmixClient::get();
  if (!c) return std::nullopt;
  RankPlace p = detect_place();  // node name and job_ranks from the environment where set
  const pmix_proc_t& me = c->me();
  pmix_proc_t w = c->wildcard();
  p.source = "pmix";
  p.rank = int(me.rank);
  p.size = int(c->uint_of(w, PMIX_JOB_SIZE, 1));
  p.local_rank = int(c->uint_of(me, PMIX_LOCAL_RANK, 0));
  p.local_size = int(c->uint_of(w, PMIX_LOCAL_SIZE, 1));
  p.node_index = int(c->uint_of(me, PMIX_NODEID, 0));
  if (!std::getenv("FANOUT_JOB_RANKS")) p.job_ranks = p.size;
  return p;
}

std::unique_ptr<Rendezvous> make_pmix_rendezvous() {
  PmixClient* c = PmixClient::get();
  return c ? std::make_unique<PmixRendezvous>(c) : nullptr;
}

}  // namespace fanout
