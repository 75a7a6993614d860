// `_dinoml_llm`: the tokenizer (src/tokenizer), sampler and chat templates (src/generate) for
// Python (python/dinoml/llm.py wraps them). Errors in the input (bad file, unknown template,
// out-of-range parameter) surface as ValueError.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "generate/chat_template.h"
#include "generate/sampler.h"
#include "import/gguf/gguf.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"

namespace py = pybind11;
using namespace dinoml;

namespace {
using Logits = py::array_t<float, py::array::c_style | py::array::forcecast>;

std::pair<const float*, size_t> flat(const Logits& a) {
  if (a.ndim() != 1 && !(a.ndim() == 2 && a.shape(0) == 1))
    throw std::invalid_argument("logits must be a vector [vocab] (or [1, vocab])");
  return {a.data(), static_cast<size_t>(a.size())};
}

py::str to_str(const std::string& s) { return py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(s.data(), s.size(), "replace")); }
}  // namespace

PYBIND11_MODULE(_dinoml_llm, m) {
  m.doc() = "DinoML LLM text side: GGUF tokenizer, sampler, chat templates";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const tokenizer::TokenizerError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const generate::ChatTemplateError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const gguf::GgufError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  py::class_<tokenizer::Tokenizer>(m, "Tokenizer")
      .def_static("from_gguf", &tokenizer::Tokenizer::from_gguf, py::arg("path"), py::call_guard<py::gil_scoped_release>())
      .def("encode",
           [](const tokenizer::Tokenizer& t, const std::string& text, bool add_special, bool parse_special) {
             py::gil_scoped_release nogil;
             return t.encode(text, add_special, parse_special);
           },
           py::arg("text"), py::arg("add_special") = true, py::arg("parse_special") = false)
      .def("decode",
           [](const tokenizer::Tokenizer& t, const std::vector<int32_t>& ids, bool remove_special, bool unparse_special) {
             return to_str(t.decode(ids, remove_special, unparse_special));
           },
           py::arg("ids"), py::arg("remove_special") = false, py::arg("unparse_special") = false)
      .def("decode_bytes",
           [](const tokenizer::Tokenizer& t, const std::vector<int32_t>& ids, bool remove_special, bool unparse_special) {
             return py::bytes(t.decode(ids, remove_special, unparse_special));
           },
           py::arg("ids"), py::arg("remove_special") = false, py::arg("unparse_special") = false)
      .def("token_to_piece",
           [](const tokenizer::Tokenizer& t, int32_t id, bool special) { return py::bytes(t.token_to_piece(id, special)); },
           py::arg("id"), py::arg("special") = false)
      .def("token_text", [](const tokenizer::Tokenizer& t, int32_t id) {
        if (id < 0 || static_cast<size_t>(id) >= t.n_tokens()) throw std::invalid_argument("token id out of range");
        return to_str(t.vocab().tokens[id]);
      })
      .def("token_id", &tokenizer::Tokenizer::token_id)
      .def("is_eog", &tokenizer::Tokenizer::is_eog)
      .def_property_readonly("n_tokens", &tokenizer::Tokenizer::n_tokens)
      .def_property_readonly("model", [](const tokenizer::Tokenizer& t) {
        return t.vocab().model == tokenizer::ModelType::spm ? "llama" : "gpt2";
      })
      .def_property_readonly("pre", [](const tokenizer::Tokenizer& t) { return t.vocab().pre; })
      .def_property_readonly("bos", [](const tokenizer::Tokenizer& t) { return t.vocab().bos; })
      .def_property_readonly("eos", [](const tokenizer::Tokenizer& t) { return t.vocab().eos; })
      .def_property_readonly("eot", [](const tokenizer::Tokenizer& t) { return t.vocab().eot; })
      .def_property_readonly("eog", [](const tokenizer::Tokenizer& t) { return t.vocab().eog; })
      .def_property_readonly("add_bos", [](const tokenizer::Tokenizer& t) { return t.vocab().add_bos; })
      .def_property_readonly("add_eos", [](const tokenizer::Tokenizer& t) { return t.vocab().add_eos; })
      .def_property_readonly("chat_template", [](const tokenizer::Tokenizer& t) { return to_str(t.vocab().chat_template); });
  m.def("known_pre_tokenizers", &tokenizer::known_pre_tokenizers);

  py::class_<generate::SamplingParams>(m, "SamplingParams")
      .def(py::init([](float temperature, int32_t top_k, float top_p, float min_p, float repeat_penalty,
                       int32_t repeat_last_n, uint64_t seed, float frequency_penalty, float presence_penalty) {
             generate::SamplingParams p{temperature, top_k,  top_p, min_p, repeat_penalty, repeat_last_n,
                                        seed,        frequency_penalty, presence_penalty};
             p.validate();
             return p;
           }),
           py::arg("temperature") = 0.8f, py::arg("top_k") = 40, py::arg("top_p") = 0.95f, py::arg("min_p") = 0.05f,
           py::arg("repeat_penalty") = 1.0f, py::arg("repeat_last_n") = 64, py::arg("seed") = 0,
           py::arg("frequency_penalty") = 0.0f, py::arg("presence_penalty") = 0.0f)
      .def_readonly("temperature", &generate::SamplingParams::temperature)
      .def_readonly("top_k", &generate::SamplingParams::top_k)
      .def_readonly("top_p", &generate::SamplingParams::top_p)
      .def_readonly("min_p", &generate::SamplingParams::min_p)
      .def_readonly("repeat_penalty", &generate::SamplingParams::repeat_penalty)
      .def_readonly("repeat_last_n", &generate::SamplingParams::repeat_last_n)
      .def_readonly("seed", &generate::SamplingParams::seed)
      .def_readonly("frequency_penalty", &generate::SamplingParams::frequency_penalty)
      .def_readonly("presence_penalty", &generate::SamplingParams::presence_penalty);

  py::class_<generate::Sampler>(m, "Sampler")
      .def(py::init<generate::SamplingParams>(), py::arg("params"))
      .def("sample", [](generate::Sampler& s, const Logits& l) {
        auto [p, n] = flat(l);
        return s.sample(p, n);
      })
      .def("distribution", [](const generate::Sampler& s, const Logits& l) {
        auto [p, n] = flat(l);
        const auto c = s.distribution(p, n);
        std::vector<int32_t> ids;
        std::vector<float> probs;
        for (const auto& x : c) {
          ids.push_back(x.id);
          probs.push_back(x.p);
        }
        return py::make_tuple(ids, probs);  // lists: python/dinoml/llm.py makes the arrays
      })
      .def("accept", &generate::Sampler::accept)
      .def("reset", &generate::Sampler::reset, py::arg("seed"))
      .def_property_readonly("params", &generate::Sampler::params);

  m.def("detect_chat_format", [](const std::string& t) { return generate::chat_format_name(generate::detect_chat_format(t)); });
  m.def("render_chat",
        [](const std::string& format, const std::vector<std::pair<std::string, std::string>>& messages,
           bool add_generation_prompt, const std::string& bos) {
          std::vector<generate::ChatMessage> ms;
          for (const auto& [r, c] : messages) ms.push_back({r, c});
          return generate::render_chat(generate::parse_chat_format(format), ms, add_generation_prompt, bos);
        },
        py::arg("format"), py::arg("messages"), py::arg("add_generation_prompt") = true, py::arg("bos") = "");
}
