#include "weights.h"

#include <array>

#include "errors.h"

namespace dinoml::runtime {

WeightSet::WeightSet(MappedFile mapped, dinoml_module_init_fn init_fn, dinoml_module_release_fn release,
                     const std::string& dir)
    : mapped_(std::move(mapped)), data_(mapped_.data()), size_(mapped_.size()), release_(release) {
  init(init_fn, dir);
}

WeightSet::WeightSet(AlignedBuffer owned, size_t size, dinoml_module_init_fn init_fn, dinoml_module_release_fn release,
                     const std::string& dir)
    : owned_(std::move(owned)), data_(owned_.data()), size_(size), release_(release) {
  init(init_fn, dir);
}

void WeightSet::init(dinoml_module_init_fn init_fn, const std::string& dir) {
  std::array<char, 1024> err{};
  if (init_fn(data_, size_, &state_, err.data(), err.size()) != 0) {
    state_ = nullptr;
    err.back() = '\0';
    fail(DINOML_ERR_RUNTIME, "module.so of artifact '", dir, "' failed to initialise its constants: ",
         err[0] ? err.data() : "(no message)");
  }
}

WeightSet::~WeightSet() {
  if (state_ && release_) release_(state_);
}

std::string slot_names(const std::vector<ConstantSlot>& slots, size_t limit) {
  std::string s;
  for (size_t i = 0; i < slots.size() && i < limit; ++i) s += (i ? ", '" : "'") + slots[i].name + "'";
  if (slots.size() > limit) s += cat(" and ", slots.size() - limit, " more");
  return slots.empty() ? "none" : s;
}

}  // namespace dinoml::runtime
