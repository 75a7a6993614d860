// 64-byte aligned, grow-only heap buffer for arenas, states and runtime-owned outputs.
// 64 bytes: one cache line and one AVX-512 register, the alignment the module ABI promises.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace dinoml::runtime {

inline constexpr size_t kBufferAlignment = 64;

class AlignedBuffer {
 public:
  uint8_t* data() const noexcept { return data_.get(); }
  size_t capacity() const noexcept { return capacity_; }

  // Ensures at least `bytes` of capacity (and a non-null pointer even for 0 bytes, so a zero-size
  // output still gets a distinct, valid address). Contents are not preserved when it grows.
  void reserve(size_t bytes) {
    if (data_ && bytes <= capacity_) return;
    size_t rounded = bytes == 0 ? kBufferAlignment : (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
    if (rounded < bytes) throw std::bad_alloc();
    void* p = std::aligned_alloc(kBufferAlignment, rounded);
    if (!p) throw std::bad_alloc();
    data_.reset(static_cast<uint8_t*>(p));
    capacity_ = rounded;
  }

  void zero() noexcept {
    if (data_) std::memset(data_.get(), 0, capacity_);
  }

 private:
  struct Free {
    void operator()(uint8_t* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t capacity_ = 0;
};

}  // namespace dinoml::runtime
