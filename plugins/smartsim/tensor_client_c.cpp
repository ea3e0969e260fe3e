// fanout_tensor_client.h on smartsim::Client: exceptions become -1 and the client's last error.
#include "fanout_tensor_client.h"

#include <time.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fanout_clock.hpp"
#include "tensor_client.h"

struct fanout_tc {
  smartsim::ClientOptions options;
  std::unique_ptr<smartsim::Client> client;
  std::vector<std::unique_ptr<smartsim::Client>> fetchers;  // get_datasets_from_list's connections, made on first use
  std::string error;
};

namespace {

thread_local std::string connect_error;

// The C enum's value -> the client's type (the enum starts at 1, in kTypes' order).
bool to_dtype(fanout_tc_dtype d, smartsim::DType& out) {
  static const smartsim::DType kOrder[] = {smartsim::DType::Float, smartsim::DType::Double, smartsim::DType::Int8,
                                           smartsim::DType::Int16, smartsim::DType::Int32,  smartsim::DType::Int64,
                                           smartsim::DType::UInt8, smartsim::DType::UInt16};
  const int i = int(d) - 1;
  if (i < 0 || i >= int(std::size(kOrder))) return false;
  out = kOrder[i];
  return true;
}

// Runs one call: 0, or -1 with the reason kept on the client.
template <class F>
int guarded(fanout_tc* c, F&& body) {
  if (!c) return -1;
  c->error.clear();
  try {
    body();
    return 0;
  } catch (const std::exception& e) {
    c->error = e.what();
  } catch (...) {
    c->error = "unknown error";
  }
  return -1;
}

struct Tensor {
  smartsim::DType dtype;
  std::vector<size_t> dims;
  size_t bytes;
};
Tensor tensor_of(const size_t* dims, size_t n_dims, fanout_tc_dtype dtype) {
  Tensor t{};
  if (!to_dtype(dtype, t.dtype)) throw smartsim::ClientError("unknown dtype " + std::to_string(int(dtype)));
  if (n_dims == 0 || !dims) throw smartsim::ClientError("a tensor needs at least one dimension");
  t.dims.assign(dims, dims + n_dims);
  t.bytes = smartsim::dtype_size(t.dtype);
  for (size_t d : t.dims) t.bytes *= d;
  return t;
}

std::string text(const char* s, const char* what) {
  if (!s) throw smartsim::ClientError(std::string(what) + " is NULL");
  return s;
}

fanout_tc* connected(smartsim::ClientOptions options) {
  try {
    auto c = std::make_unique<fanout_tc>();
    c->options = std::move(options);
    c->client = std::make_unique<smartsim::Client>(c->options);
    return c.release();
  } catch (const std::exception& e) {
    connect_error = e.what();
  }
  return nullptr;
}

void open_fetchers(fanout_tc* c, size_t n) {
  while (c->fetchers.size() < n) c->fetchers.push_back(std::make_unique<smartsim::Client>(c->options));
}

// An out-parameter, refused when NULL.
template <class T>
T& out(T* p, const char* what) {
  if (!p) throw smartsim::ClientError(std::string(what) + " is NULL");
  return *p;
}

}  // namespace

extern "C" {

int fanout_tc_api_version(void) { return FANOUT_TC_API_VERSION; }

size_t fanout_tc_dtype_size(fanout_tc_dtype dtype) {
  smartsim::DType t;
  return to_dtype(dtype, t) ? smartsim::dtype_size(t) : 0;
}

fanout_tc* fanout_tc_connect_env(void) {
  try {
    return connected(smartsim::ClientOptions::from_env());
  } catch (const std::exception& e) {
    connect_error = e.what();
  }
  return nullptr;
}

fanout_tc* fanout_tc_connect(const char* addresses, int cluster, const char* password, int connect_timeout_ms,
                             int command_timeout_ms) {
  smartsim::ClientOptions o;
  std::string list = addresses ? addresses : "";
  for (size_t start = 0; start <= list.size();) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    if (comma > start) o.addresses.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  o.cluster = cluster != 0;
  if (password) o.password = password;
  if (connect_timeout_ms > 0) o.connect_timeout_ms = connect_timeout_ms;
  if (command_timeout_ms > 0) o.command_timeout_ms = command_timeout_ms;
  return connected(std::move(o));
}

void fanout_tc_free(fanout_tc* client) { delete client; }

const char* fanout_tc_error(const fanout_tc* client) { return client ? client->error.c_str() : connect_error.c_str(); }

int fanout_tc_put_tensor(fanout_tc* c, const char* key, const void* data, const size_t* dims, size_t n_dims,
                         fanout_tc_dtype dtype) {
  return guarded(c, [&] {
    Tensor t = tensor_of(dims, n_dims, dtype);
    if (!data && t.bytes) throw smartsim::ClientError("data is NULL");
    c->client->put_tensor(text(key, "key"), t.dtype, t.dims, data, t.bytes);
  });
}

int fanout_tc_unpack_tensor(fanout_tc* c, const char* key, void* out, const size_t* dims, size_t n_dims,
                            fanout_tc_dtype dtype) {
  return guarded(c, [&] {
    Tensor t = tensor_of(dims, n_dims, dtype);
    if (!out && t.bytes) throw smartsim::ClientError("out is NULL");  // nothing written is not success
    c->client->unpack_tensor(text(key, "key"), t.dtype, t.dims, out, t.bytes);
  });
}

int fanout_tc_put_dataset(fanout_tc* c, const char* name, size_t n, const char* const* tensor_names,
                          const void* const* data, const size_t* dims, size_t n_dims, fanout_tc_dtype dtype) {
  return guarded(c, [&] {
    Tensor t = tensor_of(dims, n_dims, dtype);
    std::vector<smartsim::TensorView> views;
    if (n && (!tensor_names || !data)) throw smartsim::ClientError("tensor_names or data is NULL");
    for (size_t i = 0; i < n; ++i) {
      if (!data[i]) throw smartsim::ClientError("data[" + std::to_string(i) + "] is NULL");
      views.push_back({text(tensor_names[i], "tensor name"), t.dtype, t.dims, data[i], t.bytes});
    }
    c->client->put_dataset(text(name, "dataset name"), views);
  });
}

int fanout_tc_append_to_list(fanout_tc* c, const char* list, const char* dataset) {
  return guarded(c, [&] { c->client->append_to_list(text(list, "list"), text(dataset, "dataset")); });
}

int fanout_tc_get_list_length(fanout_tc* c, const char* list, int64_t* length) {
  return guarded(c, [&] { out(length, "length") = c->client->get_list_length(text(list, "list")); });
}

int fanout_tc_poll_list_length(fanout_tc* c, const char* list, int64_t length, int interval_ms, int tries, int* reached) {
  return guarded(c, [&] { out(reached, "reached") = c->client->poll_list_length(text(list, "list"), length, interval_ms, tries) ? 1 : 0; });
}

int fanout_tc_connect_fetchers(fanout_tc* c, int threads) {
  return guarded(c, [&] { open_fetchers(c, size_t(threads < 1 ? 1 : threads)); });
}

int fanout_tc_get_datasets_from_list(fanout_tc* c, const char* list, int threads, uint64_t* bytes) {
  return guarded(c, [&] {
    uint64_t& total = out(bytes, "bytes");
    const std::vector<std::string> names = c->client->get_list(text(list, "list"));
    const size_t n = size_t(threads < 1 ? 1 : threads);
    open_fetchers(c, n);
    std::vector<uint64_t> fetched(n, 0);
    std::vector<std::string> errors(n);
    std::vector<std::thread> pool;
    for (size_t t = 0; t < n; ++t)
      pool.emplace_back([&, t] {
        try {
          for (size_t i = t; i < names.size(); i += n) {
            std::vector<std::vector<char>> tensors;
            fetched[t] += c->fetchers[t]->get_datasets({names[i]}, tensors);
          }
        } catch (const std::exception& e) {
          errors[t] = e.what();
        }
      });
    for (auto& th : pool) th.join();
    for (auto& e : errors)
      if (!e.empty()) throw smartsim::ClientError(e);
    total = 0;
    for (uint64_t b : fetched) total += b;
  });
}

int fanout_tc_delete_list(fanout_tc* c, const char* list) {
  return guarded(c, [&] { c->client->delete_list(text(list, "list")); });
}

// The SDK's monotonic clock, the one every rank's timestamps come from, for C, Fortran and Python clients.
int64_t fanout_tc_monotonic_ns(void) { return fanout_sdk::monotonic_ns(); }

}  // extern "C"
