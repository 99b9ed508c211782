// The _hymba extension module: errors, build facts, threads and presets;
// the model, training and suites register themselves (bindings.h). The
// pure-Python layer in python/hymba/ is the public face (docs/python.md).
#include <cmath>

#include "api/hymba.h"
#include "bindings.h"
#include "core/build_info.h"
#include "core/error.h"
#include "core/threading.h"
#include "model/presets.h"
#include "model/summary.h"
#include "train/stop_signal.h"

namespace hymba::python {

py::object to_python(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return py::none();
    case nlohmann::json::value_t::boolean:
      return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return py::int_(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return py::int_(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float:
      return py::float_(j.get<double>());
    case nlohmann::json::value_t::string:
      return text(j.get_ref<const std::string&>());
    case nlohmann::json::value_t::array: {
      py::list out;
      for (const auto& v : j) out.append(to_python(v));
      return out;
    }
    case nlohmann::json::value_t::object: {
      py::dict out;
      for (const auto& [k, v] : j.items()) out[text(k)] = to_python(v);
      return out;
    }
    default:
      return py::none();
  }
}

nlohmann::json to_json(py::handle obj, const std::string& what) {
  if (obj.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(obj)) return obj.cast<bool>();
  if (py::isinstance<py::int_>(obj)) return obj.cast<int64_t>();
  if (py::isinstance<py::float_>(obj)) return obj.cast<double>();
  if (py::isinstance<py::str>(obj)) return obj.cast<std::string>();
  if (py::isinstance<py::dict>(obj)) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, v] : obj.cast<py::dict>()) {
      HYMBA_CHECK(py::isinstance<py::str>(k), what, ": keys must be strings (got ", std::string(py::str(py::repr(k))),
                  ")");
      const std::string key = k.cast<std::string>();
      out[key] = to_json(v, what + "." + key);
    }
    return out;
  }
  if (py::isinstance<py::list>(obj) || py::isinstance<py::tuple>(obj)) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : obj) out.push_back(to_json(v, what));
    return out;
  }
  // numpy scalars and other numbers
  if (py::hasattr(obj, "__index__")) return obj.attr("__index__")().cast<int64_t>();
  if (py::hasattr(obj, "__float__")) return obj.attr("__float__")().cast<double>();
  fail(what, ": cannot use a value of type ", py::str(obj.get_type().attr("__name__")).cast<std::string>());
}

py::str text(std::string_view bytes) {
  PyObject* s = PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace");
  if (s == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(s);
}

namespace {

py::list presets(const std::string& scale_name) {
  const Scale scale = parse_scale(scale_name);
  py::list out;
  for (const Preset& p : all_presets()) {
    py::dict d;
    d["name"] = p.name;
    d["title"] = text(p.title);
    d["family"] = p.family;
    d["description"] = text(p.description);
    const ModelConfig cfg = preset_config(p.name, scale);
    d["params"] = summarize(cfg, 0).total_params;
    d["config"] = to_python(cfg.to_json());
    out.append(d);
  }
  return out;
}

}  // namespace

}  // namespace hymba::python

PYBIND11_MODULE(_hymba, m) {
  namespace py = pybind11;
  using namespace hymba::python;
  m.doc() = "hymba.cpp engine bindings; use the hymba package (docs/python.md)";

  // One exception type for every engine error: bad input, files, memory.
  static py::exception<hymba::Error> hymba_error(m, "HymbaError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const hymba::Interrupted& e) {
      // SIGINT/SIGTERM stopped a run after its checkpoint: Ctrl-C as Python knows it.
      PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
    } catch (const hymba::Error& e) {
      hymba_error(e.what());
    } catch (const nlohmann::json::exception& e) {
      hymba_error(e.what());
    }
  });

  m.attr("__version__") = HYMBA_VERSION;
  m.def(
      "build_info", [] { return to_python(hymba::to_json(hymba::build_info())); },
      "The build and machine, as `hymba info --json` reports them.");
  m.def("set_threads", &hymba::set_threads, py::arg("n"),
        "CPU threads of every kernel, process-wide (0: OMP_NUM_THREADS or all cores), as `hymba --threads N`.");
  m.def("num_threads", &hymba::num_threads, "The kernels' current thread count.");
  m.def("_better_openblas_core", &hymba::better_openblas_core_here,
        "The OpenBLAS core to ask for instead of the one this process loaded, or '' (core/build_info.h).");
  m.def("presets", &presets, py::arg("scale") = "seed",
        "The built-in model presets at a scale (tiny, small, seed): name, title, family, description, params, config.");

  register_language_model(m);
  register_training(m);
  register_suites(m);
  register_classify(m);
}
