// fanout_tensor_client._native: the Python binding of fanout_tensor_client.h (pybind11). NumPy arrays go in and
// come out without a copy: put_tensor sends the array's own buffer, unpack_tensor fills the caller's array in
// place, get_tensor allocates the result once and the reply lands in it. The GIL is released during every call.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "fanout_tensor_client.h"

namespace py = pybind11;

namespace {

fanout_tc_dtype dtype_of(const py::dtype& d) {
  // RedisAI's tensors are little-endian; an array of the other byte order would be stored with its bytes swapped.
  if (d.itemsize() > 1 && d.byteorder() == '>') throw py::type_error("big-endian arrays are refused (use array.astype('<...'))");
  const char kind = d.kind();
  const auto size = d.itemsize();
  if (kind == 'f' && size == 4) return FANOUT_TC_FLOAT;
  if (kind == 'f' && size == 8) return FANOUT_TC_DOUBLE;
  if (kind == 'i' && size == 1) return FANOUT_TC_INT8;
  if (kind == 'i' && size == 2) return FANOUT_TC_INT16;
  if (kind == 'i' && size == 4) return FANOUT_TC_INT32;
  if (kind == 'i' && size == 8) return FANOUT_TC_INT64;
  if (kind == 'u' && size == 1) return FANOUT_TC_UINT8;
  if (kind == 'u' && size == 2) return FANOUT_TC_UINT16;
  throw py::type_error("dtype " + py::cast<std::string>(py::str(static_cast<const py::handle&>(d))) + " has no RedisAI tensor type (float32/64, int8/16/32/64, uint8/16)");
}

// A C-contiguous array's dimensions, refusing other layouts rather than copying them unseen.
std::vector<size_t> dims_of(const py::array& a, const char* what) {
  if (!(a.flags() & py::array::c_style)) throw py::value_error(std::string(what) + " must be C-contiguous (numpy.ascontiguousarray)");
  if (a.ndim() == 0) return {1};
  return std::vector<size_t>(a.shape(), a.shape() + a.ndim());
}

class Client {
 public:
  Client() : c_(fanout_tc_connect_env()) {
    if (!c_) throw std::runtime_error(fanout_tc_error(nullptr));
  }
  Client(const std::string& address, bool cluster, const std::string& password, int connect_timeout_ms, int command_timeout_ms)
      : c_(fanout_tc_connect(address.c_str(), cluster, password.c_str(), connect_timeout_ms, command_timeout_ms)) {
    if (!c_) throw std::runtime_error(fanout_tc_error(nullptr));
  }
  ~Client() { fanout_tc_free(c_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  void put_tensor(const std::string& key, const py::array& a) {
    const auto dims = dims_of(a, "the tensor");
    const auto dtype = dtype_of(a.dtype());
    check([&] { return fanout_tc_put_tensor(c_, key.c_str(), a.data(), dims.data(), dims.size(), dtype); });
  }
  void unpack_tensor(const std::string& key, py::array& out) {
    if (!out.writeable()) throw py::value_error("the output array is read-only");
    const auto dims = dims_of(out, "the output array");
    const auto dtype = dtype_of(out.dtype());
    check([&] { return fanout_tc_unpack_tensor(c_, key.c_str(), out.mutable_data(), dims.data(), dims.size(), dtype); });
  }
  // dtype: anything numpy.dtype() takes (numpy.float32, "int16", ...).
  py::array get_tensor(const std::string& key, const py::object& dtype, const std::vector<py::ssize_t>& shape) {
    py::array out(py::dtype::from_args(dtype), shape);
    unpack_tensor(key, out);
    return out;
  }
  void put_dataset(const std::string& name, const std::map<std::string, py::array>& tensors) {
    if (tensors.empty()) throw py::value_error("a dataset needs at least one tensor");
    const py::array& first = tensors.begin()->second;
    const auto dims = dims_of(first, "a dataset tensor");
    const auto dtype = dtype_of(first.dtype());
    std::vector<const char*> names;
    std::vector<const void*> data;
    for (auto& [n, a] : tensors) {
      if (dims_of(a, "a dataset tensor") != dims || dtype_of(a.dtype()) != dtype)
        throw py::value_error("the tensors of a dataset share one dtype and shape here ('" + n + "' differs)");
      names.push_back(n.c_str());
      data.push_back(a.data());
    }
    check([&] { return fanout_tc_put_dataset(c_, name.c_str(), names.size(), names.data(), data.data(), dims.data(), dims.size(), dtype); });
  }
  void append_to_list(const std::string& list, const std::string& dataset) {
    check([&] { return fanout_tc_append_to_list(c_, list.c_str(), dataset.c_str()); });
  }
  int64_t get_list_length(const std::string& list) {
    int64_t n = 0;
    check([&] { return fanout_tc_get_list_length(c_, list.c_str(), &n); });
    return n;
  }
  bool poll_list_length(const std::string& list, int64_t length, int interval_ms, int tries) {
    int reached = 0;
    check([&] { return fanout_tc_poll_list_length(c_, list.c_str(), length, interval_ms, tries, &reached); });
    return reached != 0;
  }
  void connect_fetchers(int threads) {
    check([&] { return fanout_tc_connect_fetchers(c_, threads); });
  }
  uint64_t get_datasets_from_list(const std::string& list, int threads) {
    uint64_t bytes = 0;
    check([&] { return fanout_tc_get_datasets_from_list(c_, list.c_str(), threads, &bytes); });
    return bytes;
  }
  void delete_list(const std::string& list) {
    check([&] { return fanout_tc_delete_list(c_, list.c_str()); });
  }

 private:
  template <class F>
  void check(F&& call) {
    int rc;
    {
      py::gil_scoped_release unlocked;
      rc = call();
    }
    if (rc != 0) throw std::runtime_error(fanout_tc_error(c_));
  }
  fanout_tc* c_;
};

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "fanout's tensor client (fanout_tensor_client.h) for NumPy arrays";
  m.attr("API_VERSION") = fanout_tc_api_version();
  m.def("monotonic_ns", &fanout_tc_monotonic_ns, "CLOCK_MONOTONIC in ns, the clock fanout's ranks time with");
  py::class_<Client>(m, "Client")
      .def(py::init<>(), "Connects from SSDB / SR_DB_TYPE / SR_DB_PASSWORD, as SmartRedis does")
      .def(py::init<const std::string&, bool, const std::string&, int, int>(), py::arg("address"), py::arg("cluster") = false,
           py::arg("password") = "", py::arg("connect_timeout_ms") = 0, py::arg("command_timeout_ms") = 0)
      // noconvert: a list or an array of another type is refused, never copied into a temporary (which
      // unpack_tensor would fill and drop).
      .def("put_tensor", &Client::put_tensor, py::arg("key"), py::arg("array").noconvert())
      .def("unpack_tensor", &Client::unpack_tensor, py::arg("key"), py::arg("out").noconvert())
      .def("get_tensor", &Client::get_tensor, py::arg("key"), py::arg("dtype"), py::arg("shape"))
      .def("put_dataset", &Client::put_dataset, py::arg("name"), py::arg("tensors"))
      .def("append_to_list", &Client::append_to_list, py::arg("list"), py::arg("dataset"))
      .def("get_list_length", &Client::get_list_length, py::arg("list"))
      .def("poll_list_length", &Client::poll_list_length, py::arg("list"), py::arg("length"), py::arg("interval_ms"), py::arg("tries"))
      .def("connect_fetchers", &Client::connect_fetchers, py::arg("threads"))
      .def("get_datasets_from_list", &Client::get_datasets_from_list, py::arg("list"), py::arg("threads") = 1)
      .def("delete_list", &Client::delete_list, py::arg("list"));
}
