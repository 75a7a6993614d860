// Chat prompts without a template engine: the Jinja template in `tokenizer.chat_template` is
// recognised by its markers and its format rendered natively. The rendering equals what the
// common templates of each format give under Jinja for string contents (tests compare with
// jinja2):
// * chatml: "<|im_start|>ROLE\nCONTENT<|im_end|>\n" per message; prompt "<|im_start|>assistant\n"
// * llama3: BOS, then "<|start_header_id|>ROLE<|end_header_id|>\n\nTRIMMED<|eot_id|>" per message;
//   prompt "<|start_header_id|>assistant<|end_header_id|>\n\n"
// * gemma: BOS, then "<start_of_turn>ROLE\nTRIMMED<end_of_turn>\n" with assistant -> "model" and a
//   leading system message joined to the first user turn ("SYSTEM\n\nUSER"); prompt
//   "<start_of_turn>model\n". Roles must alternate user/assistant after the system message.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

namespace dinoml::generate {

enum class ChatFormat { chatml, llama3, gemma };

struct ChatMessage {
  std::string role;  // system, user, assistant
  std::string content;
};

class ChatTemplateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

const char* chat_format_name(ChatFormat f);
// "chatml", "llama3", "gemma"; ChatTemplateError listing them otherwise.
ChatFormat parse_chat_format(const std::string& name);
// The format of a Jinja chat template; ChatTemplateError (saying to pass --chat-template) when
// the template is empty or of no known format.
ChatFormat detect_chat_format(const std::string& jinja_template);
// The prompt text; `bos` is the BOS token's text for the formats that start with it.
std::string render_chat(ChatFormat f, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                        const std::string& bos);

}  // namespace dinoml::generate
