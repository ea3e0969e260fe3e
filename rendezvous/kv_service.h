// The local launcher's rendezvous service: a key-value store with a fence, for the ranks of each job,
// served by one thread of the driver over TCP on the loopback interface. (Under srun --mpi=pmix the ranks
// use PMIx instead; the plugin sees the same put/get/fence either way.)
//
// Wire protocol, one command per request, text header lines ending in '\n':
//   AUTH <token>                 -> OK | ERR <why>          first command of every connection; selects the job
//   PUT <key> <len>\n<len bytes> -> OK
//   GET <key> <timeout_ms>       -> VAL <len>\n<len bytes> | ERR timeout
//   FENCE <timeout_ms>           -> OK (once every rank of the job has called FENCE) | ERR timeout
// Keys are 1-256 bytes without white space. The token is random per job, so ranks of another job (or any
// other local user) cannot read or write this job's keys.
#pragma once
#include <memory>
#include <string>

namespace fanout {

class KvService {
 public:
  // Binds an ephemeral port and starts the serving thread: on 127.0.0.1 for ranks on this host (the local
  // launcher), or on every interface when the ranks may run on other nodes (inside a batch job); the
  // advertised address is then this host's name resolved to IPv4.
  explicit KvService(bool all_interfaces = false);
  ~KvService();
  KvService(const KvService&) = delete;
  KvService& operator=(const KvService&) = delete;

  std::string address() const;           // "<ipv4>:<port>"
  std::string open_job(int fence_size);  // returns the job's token
  void close_job(const std::string& token);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fanout
