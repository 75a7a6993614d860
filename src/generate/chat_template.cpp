#include "generate/chat_template.h"

namespace dinoml::generate {

namespace {
// Jinja's `trim`: Python's str.strip() (Unicode whitespace; ASCII and the common Unicode spaces here).
std::string trim(const std::string& s) {
  auto is_space = [&](size_t i, bool from_end, size_t& len) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    len = 1;
    if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return true;
    static const char* const kWide[] = {"\xC2\x85", "\xC2\xA0", "\xE3\x80\x80", "\xE2\x80\xA8", "\xE2\x80\xA9"};
    for (const char* w : kWide) {
      const std::string ws(w);
      if (!from_end && s.compare(i, ws.size(), ws) == 0) { len = ws.size(); return true; }
      if (from_end && i + 1 >= ws.size() && s.compare(i + 1 - ws.size(), ws.size(), ws) == 0) { len = ws.size(); return true; }
    }
    return false;
  };
  size_t b = 0, e = s.size(), len = 0;
  while (b < e && is_space(b, false, len)) b += len;
  while (e > b && is_space(e - 1, true, len)) e -= len;
  return s.substr(b, e - b);
}

void check_role(const ChatMessage& m) {
  if (m.role != "system" && m.role != "user" && m.role != "assistant")
    throw ChatTemplateError("chat message role '" + m.role + "' is not one of system, user, assistant");
}
}  // namespace

const char* chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::chatml: return "chatml";
    case ChatFormat::llama3: return "llama3";
    case ChatFormat::gemma: return "gemma";
  }
  return "?";
}

ChatFormat parse_chat_format(const std::string& name) {
  for (ChatFormat f : {ChatFormat::chatml, ChatFormat::llama3, ChatFormat::gemma})
    if (name == chat_format_name(f)) return f;
  throw ChatTemplateError("unknown chat template '" + name + "' (known: chatml, llama3, gemma)");
}

ChatFormat detect_chat_format(const std::string& t) {
  if (t.empty())
    throw ChatTemplateError("the model has no chat template (tokenizer.chat_template): pass --chat-template chatml|llama3|gemma");
  if (t.find("<|im_start|>") != std::string::npos) return ChatFormat::chatml;
  if (t.find("<|start_header_id|>") != std::string::npos) return ChatFormat::llama3;
  if (t.find("<start_of_turn>") != std::string::npos) return ChatFormat::gemma;
  throw ChatTemplateError("the model's chat template (tokenizer.chat_template) is none of the forms rendered natively "
                          "(ChatML, Llama-3, Gemma): pass --chat-template chatml|llama3|gemma to choose one");
}

std::string render_chat(ChatFormat f, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                        const std::string& bos) {
  for (const auto& m : messages) check_role(m);
  std::string out;
  switch (f) {
    case ChatFormat::chatml:
      for (const auto& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      break;
    case ChatFormat::llama3:
      out += bos;
      for (const auto& m : messages)
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatFormat::gemma: {
      out += bos;
      size_t first = 0;
      std::string prefix;
      if (!messages.empty() && messages[0].role == "system") {
        prefix = messages[0].content + "\n\n";
        first = 1;
      }
      for (size_t i = first; i < messages.size(); ++i) {
        const auto& m = messages[i];
        if ((m.role == "user") != ((i - first) % 2 == 0))
          throw ChatTemplateError("Gemma chats alternate user/assistant/user/... (after an optional first system message); "
                                  "message " + std::to_string(i) + " has role " + m.role);
        const std::string role = m.role == "assistant" ? "model" : m.role;
        out += "<start_of_turn>" + role + "\n" + (i == first ? prefix : "") + trim(m.content) + "<end_of_turn>\n";
      }
      if (add_generation_prompt) out += "<start_of_turn>model\n";
      break;
    }
  }
  return out;
}

}  // namespace dinoml::generate
