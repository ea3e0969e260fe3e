// A SmartRedis-compatible tensor client on hiredis: RedisAI's wire protocol (AI.TENSORSET/AI.TENSORGET with
// META BLOB), datasets, lists, Redis Cluster routing (CRC16 slots, hash tags, MOVED/ASK), pipelining,
// connection and command timeouts, configured like SmartRedis from SSDB / SR_DB_TYPE / SR_* variables.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

struct redisContext;
struct redisReply;

namespace smartsim {

enum class DType { Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16 };
const char* dtype_name(DType t);
size_t dtype_size(DType t);
bool parse_dtype(std::string_view name, DType& out);

class ClientError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ClientOptions {
  std::vector<std::string> addresses;  // "host:port" or "unix:/path/to/socket"
  bool cluster = false;
  std::string password;
  int connect_timeout_ms = 5000;
  int command_timeout_ms = 30000;
  // SSDB (comma-separated addresses), SR_DB_TYPE (Clustered|Standalone), SR_CONN_TIMEOUT and SR_CMD_TIMEOUT
  // (milliseconds), SR_DB_PASSWORD. Throws ClientError when SSDB is missing or malformed.
  static ClientOptions from_env();
};

// Hash slot of a key (CRC16 XMODEM of the key, or of its {hash tag}, modulo 16384).
uint16_t key_slot(std::string_view key);

struct TensorView {
  std::string name;
  DType dtype;
  std::vector<size_t> dims;
  const void* data;
  size_t bytes;
};

// AI.MODELSTORE's batching settings (0: off) and tag.
struct ModelOptions {
  int batch_size = 0, min_batch_size = 0, min_batch_timeout_ms = 0;
  std::string tag;
};

class Client {
 public:
  explicit Client(ClientOptions opts);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  void put_tensor(const std::string& key, DType dtype, const std::vector<size_t>& dims, const void* data, size_t bytes);
  // Reads key into out, which must be exactly the tensor's size; a different dtype or shape is an error.
  void unpack_tensor(const std::string& key, DType dtype, const std::vector<size_t>& dims, void* out, size_t bytes);
  // A dataset: its tensors under "{name}.<tensor>" (one hash slot) and "{name}.meta", written in one pipeline.
  void put_dataset(const std::string& name, const std::vector<TensorView>& tensors);
  bool dataset_exists(const std::string& name);
  void append_to_list(const std::string& list, const std::string& dataset);
  int64_t get_list_length(const std::string& list);
  // Polls LLEN until it reaches `length`; false after `tries` polls `interval_ms` apart.
  bool poll_list_length(const std::string& list, int64_t length, int interval_ms, int tries);
  std::vector<std::string> get_list(const std::string& list);
  void delete_list(const std::string& list);
  // Every tensor of every dataset in the list: bytes fetched per dataset in one pipeline.
  size_t get_datasets_from_list(const std::string& list, std::vector<std::vector<char>>& into);
  // Every tensor of the named datasets (one pipeline per dataset); returns the bytes fetched.
  size_t get_datasets(const std::vector<std::string>& names, std::vector<std::vector<char>>& into);
  // Models and scripts are stored on every shard, as SmartRedis stores them, each under shard_prefix(s) + name.
  // run_model / run_script use the copy on the shard of their first input.
  void set_model(const std::string& name, std::string_view blob, const std::string& device, const ModelOptions& options = {});
  void set_script(const std::string& name, const std::string& device, std::string_view source,
                  const std::vector<std::string>& entry_points);
  void run_model(const std::string& name, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs);
  void run_script(const std::string& name, const std::string& function, const std::vector<std::string>& inputs,
                  const std::vector<std::string>& outputs);
  // Polls until the model (script) is on every shard; false after `tries` polls `interval_ms` apart.
  bool poll_model(const std::string& name, int interval_ms, int tries);
  int shard_count();
  // "" on a standalone database; else a "{tag}" whose keys hash to shard s: tensors named with it stay on the
  // shard of the model copy that runs them (no cross-shard copy, SmartRedis#235).
  std::string shard_prefix(int shard);
  // Plain commands for tests and tools (routed by the first key when `key` is given).
  std::string command_status(const std::vector<std::string>& argv, const std::string& key = "");

 private:
  struct Node;
  struct ReplyDeleter {
    void operator()(redisReply* r) const;
  };
  using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

  Node& connect(const std::string& address);
  Node& node_for(std::string_view key);
  void refresh_slots();
  // Runs one exchange with the node that owns key's slot, following MOVED and ASK redirections: `exchange`
  // returns the server's error text ("" when the answer was not an error) and throws when the connection fails.
  // The last exchange's error text is returned ("" on success).
  std::string routed(std::string_view key, const char* what, const std::function<std::string(Node&)>& exchange);
  // Drops a broken connection (it is never reused) and throws naming the command, the node and the timeout.
  [[noreturn]] void connection_failed(Node& node, const char* what, const std::string& why);
  // Sends one command for `key` to the node owning its slot, following MOVED and ASK redirections.
  Reply command(std::string_view key, const std::vector<const char*>& argv, const std::vector<size_t>& lens);
  // Sends several commands for keys of one slot in one round trip; returns the replies in order.
  std::vector<Reply> pipeline(std::string_view key, const std::vector<std::vector<std::string_view>>& commands);

  ClientOptions opts_;
  std::map<std::string, std::unique_ptr<Node>> nodes_;
  std::array<std::string, 16384> slot_owner_;
  std::string standalone_;
  std::vector<std::string> shards_;        // masters, sorted (cluster) or the one server
  std::map<int, std::string> shard_prefix_;
  const std::vector<std::string>& shards();
  int shard_of(std::string_view key);
  void expect_ok(const std::string& what, const Reply& r);
};

}  // namespace smartsim
