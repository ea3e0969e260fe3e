#include "tensor_client.h"

#include "tensor_wire.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <set>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace smartsim {

namespace {

struct TypeInfo {
  DType t;
  const char* name;
  size_t size;
};
const TypeInfo kTypes[] = {{DType::Float, "FLOAT", 4}, {DType::Double, "DOUBLE", 8}, {DType::Int8, "INT8", 1},
                           {DType::Int16, "INT16", 2}, {DType::Int32, "INT32", 4},   {DType::Int64, "INT64", 8},
                           {DType::UInt8, "UINT8", 1}, {DType::UInt16, "UINT16", 2}};

timeval to_timeval(int ms) { return timeval{ms / 1000, (ms % 1000) * 1000}; }

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t c = s.find(',', start);
    std::string part = s.substr(start, c == std::string::npos ? std::string::npos : c - start);
    if (!part.empty()) out.push_back(part);
    if (c == std::string::npos) break;
    start = c + 1;
  }
  return out;
}

int env_ms(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long ms = std::strtol(v, &end, 10);
  if (*end || ms <= 0) throw ClientError(std::string(name) + ": '" + v + "' is not a positive number of milliseconds");
  return int(ms);
}

std::string shape_text(const std::vector<size_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace

const char* dtype_name(DType t) {
  for (auto& k : kTypes)
    if (k.t == t) return k.name;
  return "?";
}

size_t dtype_size(DType t) {
  for (auto& k : kTypes)
    if (k.t == t) return k.size;
  return 0;
}

bool parse_dtype(std::string_view name, DType& out) {
  for (auto& k : kTypes)
    if (name == k.name) return out = k.t, true;
  return false;
}

uint16_t key_slot(std::string_view key) {
  // Only the part between the first '{' and the next '}' counts, when it is not empty (Redis Cluster's rule).
  auto open = key.find('{');
  if (open != std::string_view::npos) {
    auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  uint16_t crc = 0;  // CRC16-CCITT (XMODEM)
  for (unsigned char c : key) {
    crc ^= uint16_t(c) << 8;
    for (int i = 0; i < 8; ++i) crc = (crc & 0x8000) ? uint16_t((crc << 1) ^ 0x1021) : uint16_t(crc << 1);
  }
  return crc & 16383;
}

ClientOptions ClientOptions::from_env() {
  ClientOptions o;
  const char* ssdb = std::getenv("SSDB");
  if (!ssdb || !*ssdb) throw ClientError("SSDB is not set: give the database address(es) as host:port[,host:port...]");
  o.addresses = split_commas(ssdb);
  if (o.addresses.empty()) throw ClientError(std::string("SSDB: no address in '") + ssdb + "'");
  const char* type = std::getenv("SR_DB_TYPE");
  o.cluster = type && std::string(type) == "Clustered";
  o.connect_timeout_ms = env_ms("SR_CONN_TIMEOUT", o.connect_timeout_ms);
  o.command_timeout_ms = env_ms("SR_CMD_TIMEOUT", o.command_timeout_ms);
  if (const char* pw = std::getenv("SR_DB_PASSWORD")) o.password = pw;
  return o;
}

struct Client::Node {
  std::string address;
  redisContext* ctx = nullptr;
  ~Node() {
    if (ctx) redisFree(ctx);
  }
};

void Client::ReplyDeleter::operator()(redisReply* r) const {
  if (r) freeReplyObject(r);
}

Client::Client(ClientOptions opts) : opts_(std::move(opts)) {
  if (opts_.addresses.empty()) throw ClientError("no database address given");
  if (opts_.cluster) refresh_slots();
  else standalone_ = connect(opts_.addresses.front()).address;
}

Client::~Client() = default;

Client::Node& Client::connect(const std::string& address) {
  auto it = nodes_.find(address);
  if (it != nodes_.end() && it->second->ctx && !it->second->ctx->err) return *it->second;
  auto node = std::make_unique<Node>();
  node->address = address;
  timeval tv = to_timeval(opts_.connect_timeout_ms);
  if (address.rfind("unix:", 0) == 0) {
    node->ctx = redisConnectUnixWithTimeout(address.c_str() + 5, tv);
  } else {
    auto colon = address.rfind(':');
    if (colon == std::string::npos) throw ClientError("malformed database address '" + address + "' (host:port or unix:/path)");
    node->ctx = redisConnectWithTimeout(address.substr(0, colon).c_str(), std::atoi(address.c_str() + colon + 1), tv);
  }
  if (!node->ctx || node->ctx->err)
    throw ClientError("cannot connect to the database at " + address + ": " + (node->ctx ? node->ctx->errstr : "out of memory") +
                      " (connect timeout " + std::to_string(opts_.connect_timeout_ms) + " ms)");
  timeval cmd = to_timeval(opts_.command_timeout_ms);
  redisSetTimeout(node->ctx, cmd);
  if (!opts_.password.empty()) {
    Reply r(static_cast<redisReply*>(redisCommand(node->ctx, "AUTH %b", opts_.password.data(), opts_.password.size())));
    if (!r || r->type == REDIS_REPLY_ERROR)
      throw ClientError("the database at " + address + " refused the password: " + (r ? r->str : node->ctx->errstr));
  }
  auto& slot = nodes_[address];
  slot = std::move(node);
  return *slot;
}

void Client::refresh_slots() {
  std::string last_error;
  for (const auto& seed : opts_.addresses) {
    try {
      Node& n = connect(seed);
      Reply r(static_cast<redisReply*>(redisCommand(n.ctx, "CLUSTER SLOTS")));
      if (!r || r->type != REDIS_REPLY_ARRAY) {
        last_error = seed + ": " + (r ? std::string(r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply") : n.ctx->errstr);
        continue;
      }
      // Every element checked for its type and range before it is used: a malformed reply (a negative slot, a
      // host that is not a string) is an error naming the server, never an index out of bounds.
      auto malformed = [&](size_t i, const char* why) {
        return ClientError("malformed CLUSTER SLOTS reply from " + seed + ": range " + std::to_string(i) + " " + why);
      };
      std::vector<bool> seen(16384, false);
      size_t covered = 0;
      for (size_t i = 0; i < r->elements; ++i) {
        const redisReply* range = r->element[i];
        if (range->type != REDIS_REPLY_ARRAY || range->elements < 3) throw malformed(i, "is not [first, last, master, ...]");
        const redisReply *first = range->element[0], *last = range->element[1], *master = range->element[2];
        if (first->type != REDIS_REPLY_INTEGER || last->type != REDIS_REPLY_INTEGER || first->integer < 0 || last->integer > 16383 ||
            first->integer > last->integer)
          throw malformed(i, "has slots outside 0..16383");
        if (master->type != REDIS_REPLY_ARRAY || master->elements < 2 || master->element[0]->type != REDIS_REPLY_STRING ||
            master->element[1]->type != REDIS_REPLY_INTEGER || master->element[1]->integer < 1 || master->element[1]->integer > 65535)
          throw malformed(i, "has no master [host, port]");
        std::string host(master->element[0]->str, master->element[0]->len);
        if (host.empty()) host = seed.substr(0, seed.rfind(':'));
        const std::string addr = host + ":" + std::to_string(master->element[1]->integer);
        for (long long s = first->integer; s <= last->integer; ++s) {
          slot_owner_[size_t(s)] = addr;
          if (!seen[size_t(s)]) seen[size_t(s)] = true, ++covered;
        }
      }
      if (covered != 16384) throw ClientError("the Redis Cluster at " + seed + " covers " + std::to_string(covered) + " of 16384 slots");
      return;
    } catch (const ClientError& e) {
      last_error = e.what();
    }
  }
  throw ClientError("cannot read the cluster's slot map: " + last_error);
}

Client::Node& Client::node_for(std::string_view key) {
  if (!opts_.cluster) return connect(standalone_);
  return connect(slot_owner_[key_slot(key)]);
}

void Client::connection_failed(Node& node, const char* what, const std::string& why) {
  const std::string address = node.address;  // a copy: erase destroys the node
  nodes_.erase(address);
  throw ClientError(std::string(what) + " to " + address + " failed: " + why + " (command timeout " +
                    std::to_string(opts_.command_timeout_ms) + " ms)");
}

std::string Client::routed(std::string_view key, const char* what, const std::function<std::string(Node&)>& exchange) {
  Node* node = &node_for(key);
  bool asking = false;
  for (int hop = 0; hop < 5; ++hop) {
    if (asking) {
      Reply ok(static_cast<redisReply*>(redisCommand(node->ctx, "ASKING")));
      if (!ok) connection_failed(*node, "ASKING", node->ctx->errstr);
      if (ok->type == REDIS_REPLY_ERROR) return std::string(ok->str, ok->len);
    }
    const std::string error = exchange(*node);
    if (opts_.cluster && (error.rfind("MOVED ", 0) == 0 || error.rfind("ASK ", 0) == 0)) {
      // "MOVED <slot> <host:port>": the slot lives elsewhere now; "ASK": only this request goes there.
      const bool moved = error[0] == 'M';
      const std::string target = error.substr(error.rfind(' ') + 1);
      if (moved) {
        slot_owner_[key_slot(key)] = target;
        refresh_slots();
      }
      node = &connect(target);
      asking = !moved;
      continue;
    }
    return error;
  }
  throw ClientError(std::string(what) + ": too many cluster redirections for key '" + std::string(key) + "'");
}

Client::Reply Client::command(std::string_view key, const std::vector<const char*>& argv, const std::vector<size_t>& lens) {
  Reply r;
  routed(key, argv[0], [&](Node& node) {
    r.reset(static_cast<redisReply*>(redisCommandArgv(node.ctx, int(argv.size()), const_cast<const char**>(argv.data()), lens.data())));
    if (!r) connection_failed(node, argv[0], node.ctx->errstr);
    return r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : std::string();
  });
  return r;
}

std::vector<Client::Reply> Client::pipeline(std::string_view key, const std::vector<std::vector<std::string_view>>& commands) {
  Node& node = node_for(key);
  for (auto& c : commands) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (auto& a : c) argv.push_back(a.data()), lens.push_back(a.size());
    redisAppendCommandArgv(node.ctx, int(argv.size()), argv.data(), lens.data());
  }
  std::vector<Reply> replies;
  for (size_t i = 0; i < commands.size(); ++i) {
    void* r = nullptr;
    if (redisGetReply(node.ctx, &r) != REDIS_OK) connection_failed(node, "pipeline", node.ctx->errstr);
    replies.emplace_back(static_cast<redisReply*>(r));
    if (replies.back()->type == REDIS_REPLY_ERROR)
      throw ClientError(std::string(commands[i][0]) + " failed on " + node.address + ": " + replies.back()->str);
  }
  return replies;
}

void Client::put_tensor(const std::string& key, DType dtype, const std::vector<size_t>& dims, const void* data, size_t bytes) {
  size_t expect = dtype_size(dtype);
  for (size_t d : dims) expect *= d;
  if (dims.empty() || expect != bytes)
    throw ClientError("put_tensor " + key + ": " + std::to_string(bytes) + " bytes do not make a " + dtype_name(dtype) + " tensor of shape " + shape_text(dims));
  std::vector<std::string> dim_text;
  for (size_t d : dims) dim_text.push_back(std::to_string(d));
  std::vector<const char*> argv = {"AI.TENSORSET", key.c_str(), dtype_name(dtype)};
  std::vector<size_t> lens = {12, key.size(), std::strlen(dtype_name(dtype))};
  for (auto& d : dim_text) argv.push_back(d.c_str()), lens.push_back(d.size());
  argv.push_back("BLOB"), lens.push_back(4);
  argv.push_back(static_cast<const char*>(data)), lens.push_back(bytes);
  // The tensor's bytes go from the caller's buffer to the socket (one gathering sendmsg), not through a command string.
  const std::string error = routed(key, "put_tensor", [&](Node& node) {
    void* raw = nullptr;
    try {
      send_with_payload(node.ctx, argv, lens);
    } catch (const WireError& e) {
      connection_failed(node, "AI.TENSORSET", e.what());
    }
    if (redisGetReply(node.ctx, &raw) != REDIS_OK) connection_failed(node, "AI.TENSORSET", node.ctx->errstr);
    Reply r(static_cast<redisReply*>(raw));
    return r->type == REDIS_REPLY_ERROR ? std::string(r->str, r->len) : std::string();
  });
  if (!error.empty()) throw ClientError("put_tensor " + key + ": " + error);
}

void Client::unpack_tensor(const std::string& key, DType dtype, const std::vector<size_t>& dims, void* out, size_t bytes) {
  std::vector<const char*> argv = {"AI.TENSORGET", key.c_str(), "META", "BLOB"};
  std::vector<size_t> lens = {12, key.size(), 4, 4};
  // The blob is read off the socket straight into `out`; a tensor of another type, shape or size is read and
  // dropped (the connection stays usable) and reported.
  TensorMeta meta;
  bool fits = false;
  const std::string error = routed(key, "unpack_tensor", [&](Node& node) {
    try {
      redisAppendCommandArgv(node.ctx, int(argv.size()), argv.data(), lens.data());
      for (int done = 0; !done;)
        if (redisBufferWrite(node.ctx, &done) != REDIS_OK) throw WireError(node.ctx->errstr);
      return read_tensor_reply(node.ctx, meta, [&](const TensorMeta& m) {
        fits = m.dtype == dtype_name(dtype) && m.dims == dims && m.bytes == bytes;
        return fits ? static_cast<char*>(out) : nullptr;
      });
    } catch (const WireError& e) {
      connection_failed(node, "AI.TENSORGET", e.what());
    }
  });
  if (!error.empty()) throw ClientError("unpack_tensor " + key + ": " + error);
  if (fits) return;
  if (meta.dtype != dtype_name(dtype) || meta.dims != dims)
    throw ClientError("unpack_tensor " + key + ": the stored tensor is " + meta.dtype + " " + shape_text(meta.dims) + ", asked for " +
                      dtype_name(dtype) + " " + shape_text(dims));
  throw ClientError("unpack_tensor " + key + ": " + std::to_string(meta.bytes) + " bytes stored, buffer holds " + std::to_string(bytes));
}

void Client::put_dataset(const std::string& name, const std::vector<TensorView>& tensors) {
  const std::string tag = "{" + name + "}";
  std::string names;
  for (auto& t : tensors) names += (names.empty() ? "" : ",") + t.name;
  std::vector<std::vector<std::string>> storage;  // dims as text, kept alive for the views
  std::vector<std::vector<std::string_view>> cmds;
  std::string meta = tag + ".meta", complete = ".COMPLETE", one = "1", tn = ".tensor_names";
  cmds.push_back({"DEL", meta});
  cmds.push_back({"HSET", meta, tn, names});
  std::vector<std::string> keys;
  keys.reserve(tensors.size());
  storage.reserve(tensors.size());
  for (auto& t : tensors) {
    keys.push_back(tag + "." + t.name);
    storage.emplace_back();
    for (size_t d : t.dims) storage.back().push_back(std::to_string(d));
    std::vector<std::string_view> c = {"AI.TENSORSET", keys.back(), dtype_name(t.dtype)};
    for (auto& d : storage.back()) c.push_back(d);
    c.push_back("BLOB");
    c.push_back(std::string_view(static_cast<const char*>(t.data), t.bytes));
    cmds.push_back(c);
  }
  cmds.push_back({"HSET", meta, complete, one});
  pipeline(tag, cmds);
}

bool Client::dataset_exists(const std::string& name) {
  std::string key = "{" + name + "}.meta", field = ".COMPLETE";
  Reply r = command(key, {"HEXISTS", key.c_str(), field.c_str()}, {7, key.size(), field.size()});
  return r->type == REDIS_REPLY_INTEGER && r->integer == 1;
}

void Client::append_to_list(const std::string& list, const std::string& dataset) {
  Reply r = command(list, {"RPUSH", list.c_str(), dataset.c_str()}, {5, list.size(), dataset.size()});
  if (r->type == REDIS_REPLY_ERROR) throw ClientError("append_to_list " + list + ": " + r->str);
}

int64_t Client::get_list_length(const std::string& list) {
  Reply r = command(list, {"LLEN", list.c_str()}, {4, list.size()});
  if (r->type != REDIS_REPLY_INTEGER) throw ClientError("get_list_length " + list + ": " + (r->type == REDIS_REPLY_ERROR ? r->str : "bad reply"));
  return r->integer;
}

bool Client::poll_list_length(const std::string& list, int64_t length, int interval_ms, int tries) {
  for (int i = 0; i < tries; ++i) {
    if (get_list_length(list) >= length) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
  }
  return false;
}

std::vector<std::string> Client::get_list(const std::string& list) {
  Reply r = command(list, {"LRANGE", list.c_str(), "0", "-1"}, {6, list.size(), 1, 2});
  std::vector<std::string> out;
  if (r->type != REDIS_REPLY_ARRAY) throw ClientError("get_list " + list + ": " + (r->type == REDIS_REPLY_ERROR ? r->str : "bad reply"));
  for (size_t i = 0; i < r->elements; ++i) out.emplace_back(r->element[i]->str, r->element[i]->len);
  return out;
}

void Client::delete_list(const std::string& list) { command(list, {"DEL", list.c_str()}, {3, list.size()}); }

size_t Client::get_datasets_from_list(const std::string& list, std::vector<std::vector<char>>& into) {
  return get_datasets(get_list(list), into);
}

size_t Client::get_datasets(const std::vector<std::string>& names, std::vector<std::vector<char>>& into) {
  size_t bytes = 0;
  for (const std::string& name : names) {
    const std::string tag = "{" + name + "}", meta = tag + ".meta", field = ".tensor_names";
    Reply names = command(meta, {"HGET", meta.c_str(), field.c_str()}, {4, meta.size(), field.size()});
    if (names->type != REDIS_REPLY_STRING) throw ClientError("dataset " + name + " has no tensor list");
    std::vector<std::string> keys;
    for (auto& t : split_commas(std::string(names->str, names->len))) keys.push_back(tag + "." + t);
    std::vector<std::vector<std::string_view>> cmds;
    for (auto& k : keys) cmds.push_back({"AI.TENSORGET", k, "BLOB"});
    for (auto& r : pipeline(tag, cmds)) {
      into.emplace_back(r->str, r->str + r->len);
      bytes += r->len;
    }
  }
  return bytes;
}

const std::vector<std::string>& Client::shards() {
  if (shards_.empty()) {
    if (!opts_.cluster) shards_ = {standalone_};
    else {
      std::set<std::string> masters(slot_owner_.begin(), slot_owner_.end());
      shards_.assign(masters.begin(), masters.end());
    }
  }
  return shards_;
}

int Client::shard_count() { return int(shards().size()); }

int Client::shard_of(std::string_view key) {
  if (!opts_.cluster) return 0;
  const auto& all = shards();
  return int(std::find(all.begin(), all.end(), slot_owner_[key_slot(key)]) - all.begin());
}

std::string Client::shard_prefix(int shard) {
  if (!opts_.cluster) return "";
  auto it = shard_prefix_.find(shard);
  if (it != shard_prefix_.end()) return it->second;
  const std::string& owner = shards().at(size_t(shard));
  for (int n = 0; n < 1 << 20; ++n) {
    std::string tag = "{" + std::to_string(n) + "}";
    if (slot_owner_[key_slot(tag)] == owner) return shard_prefix_[shard] = tag;
  }
  throw ClientError("no hash tag maps to shard " + owner);
}

void Client::expect_ok(const std::string& what, const Reply& r) {
  if (r->type == REDIS_REPLY_ERROR) throw ClientError(what + ": " + std::string(r->str, r->len));
  if (r->type == REDIS_REPLY_STATUS && std::string_view(r->str, r->len) == "TIMEDOUT") throw ClientError(what + ": timed out in the database");
}

namespace {

// argv as hiredis wants it: pointers and lengths (the views outlive the call).
struct Args {
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  Args& add(std::string_view s) {
    argv.push_back(s.data()), lens.push_back(s.size());
    return *this;
  }
  Args& add_counted(const char* word, const std::vector<std::string>& names, const std::string& prefix, std::vector<std::string>& keep) {
    add(word);
    keep.push_back(std::to_string(names.size()));
    add(keep.back());
    for (const auto& n : names) keep.push_back(prefix + n), add(keep.back());
    return *this;
  }
};

}  // namespace

void Client::set_model(const std::string& name, std::string_view blob, const std::string& device, const ModelOptions& o) {
  const std::string numbers[] = {std::to_string(o.batch_size), std::to_string(o.min_batch_size), std::to_string(o.min_batch_timeout_ms)};
  for (int s = 0; s < shard_count(); ++s) {
    const std::string key = shard_prefix(s) + name;
    Args a;
    a.add("AI.MODELSTORE").add(key).add("TORCH").add(device);
    if (!o.tag.empty()) a.add("TAG").add(o.tag);
    if (o.batch_size > 0) {
      a.add("BATCHSIZE").add(numbers[0]);
      if (o.min_batch_size > 0) a.add("MINBATCHSIZE").add(numbers[1]);
      if (o.min_batch_size > 0 && o.min_batch_timeout_ms > 0) a.add("MINBATCHTIMEOUT").add(numbers[2]);
    }
    a.add("BLOB").add(blob);
    expect_ok("set_model " + key, command(key, a.argv, a.lens));
  }
}

void Client::set_script(const std::string& name, const std::string& device, std::string_view source,
                        const std::vector<std::string>& entry_points) {
  for (int s = 0; s < shard_count(); ++s) {
    const std::string key = shard_prefix(s) + name;
    std::vector<std::string> keep;
    keep.reserve(entry_points.size() + 1);
    Args a;
    a.add("AI.SCRIPTSTORE").add(key).add(device).add_counted("ENTRY_POINTS", entry_points, "", keep).add("SOURCE").add(source);
    expect_ok("set_script " + key, command(key, a.argv, a.lens));
  }
}

void Client::run_model(const std::string& name, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs) {
  if (inputs.empty() || outputs.empty()) throw ClientError("run_model " + name + ": needs inputs and outputs");
  const std::string key = shard_prefix(shard_of(inputs[0])) + name;
  std::vector<std::string> keep;
  keep.reserve(inputs.size() + outputs.size() + 2);
  Args a;
  a.add("AI.MODELEXECUTE").add(key).add_counted("INPUTS", inputs, "", keep).add_counted("OUTPUTS", outputs, "", keep);
  expect_ok("run_model " + key, command(key, a.argv, a.lens));
}

void Client::run_script(const std::string& name, const std::string& function, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs) {
  if (inputs.empty()) throw ClientError("run_script " + name + ": needs inputs");
  const std::string key = shard_prefix(shard_of(inputs[0])) + name;
  std::vector<std::string> keep;
  keep.reserve(inputs.size() + outputs.size() + 2);
  Args a;
  a.add("AI.SCRIPTEXECUTE").add(key).add(function).add_counted("INPUTS", inputs, "", keep).add_counted("OUTPUTS", outputs, "", keep);
  expect_ok("run_script " + key + " " + function, command(key, a.argv, a.lens));
}

bool Client::poll_model(const std::string& name, int interval_ms, int tries) {
  for (int t = 0; t < tries; ++t) {
    bool all = true;
    for (int s = 0; s < shard_count() && all; ++s) {
      const std::string key = shard_prefix(s) + name;
      Reply r = command(key, {"EXISTS", key.c_str()}, {6, key.size()});
      all = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    }
    if (all) return true;
    timespec ts{interval_ms / 1000, (interval_ms % 1000) * 1000000L};
    nanosleep(&ts, nullptr);
  }
  return false;
}

std::string Client::command_status(const std::vector<std::string>& argv, const std::string& key) {
  std::vector<const char*> a;
  std::vector<size_t> l;
  for (auto& s : argv) a.push_back(s.data()), l.push_back(s.size());
  Reply r = command(key.empty() ? argv.back() : key, a, l);
  if (r->type == REDIS_REPLY_ERROR) throw ClientError(r->str);
  if (r->type == REDIS_REPLY_INTEGER) return std::to_string(r->integer);
  return r->str ? std::string(r->str, r->len) : "";
}

}  // namespace smartsim
