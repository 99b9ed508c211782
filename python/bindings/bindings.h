// Shared pieces of the _hymba extension (docs/python.md): JSON <-> Python
// conversion, UTF-8 text that never fails to decode, and the registration
// functions of each part of the module.
#pragma once

#include <atomic>
#include <string>
#include <string_view>
#include <vector>

// pybind11 is included as a system header (its own warnings are not ours).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>

#include "api/hymba.h"

namespace hymba::python {

namespace py = pybind11;

// JSON values as Python objects (dict, list, str, int, float, bool, None).
py::object to_python(const nlohmann::json& j);
// Python dicts/lists/scalars as JSON; `what` names the argument in errors.
nlohmann::json to_json(py::handle obj, const std::string& what);

// Engine text as str: invalid UTF-8 (a byte model's draw) becomes U+FFFD
// instead of failing, as the CLI writes the bytes and a terminal shows them.
py::str text(std::string_view bytes);

void register_language_model(py::module_& m);
void register_training(py::module_& m);
void register_suites(py::module_& m);
void register_classify(py::module_& m);

// A LanguageModel shared with Python. The engine is not for two calls at
// once, and a streaming generate runs on its own thread: BusyGuard refuses a
// second call with a clear message instead.
struct ModelHolder {
  explicit ModelHolder(LanguageModel m) : lm(std::move(m)) {}
  LanguageModel lm;
  std::atomic<bool> busy{false};
};

class BusyGuard {
 public:
  explicit BusyGuard(ModelHolder& h) : h_(h) {
    HYMBA_CHECK(!h_.busy.exchange(true),
                "LanguageModel: another call is still using this model (an unfinished streaming generate?)");
  }
  ~BusyGuard() { h_.busy = false; }
  BusyGuard(const BusyGuard&) = delete;
  BusyGuard& operator=(const BusyGuard&) = delete;

 private:
  ModelHolder& h_;
};

// A vector handed to numpy without a copy: the array's base owns it.
template <class T>
py::array_t<T> as_numpy(std::vector<T>&& values, const std::vector<py::ssize_t>& shape) {
  auto* owned = new std::vector<T>(std::move(values));
  py::capsule owner(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(shape, owned->data(), owner);
}

}  // namespace hymba::python
