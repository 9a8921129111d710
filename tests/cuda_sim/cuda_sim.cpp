// The CUDA execution shim's runtime (see cuda_sim.h): fibers, the block scheduler, barriers, warp collectives, shared
// memory and its poison. Single-threaded: launches are serialised by a mutex. This file has no thread_local of its
// own, so this library's TLS block holds only the kernels' `__shared__` arrays, which are poisoned as a whole.
#include "cuda_sim.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define CUDA_SIM_ASAN 1
#endif

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace cuda_sim {

Index3 thread_index, block_index, block_dim, grid_dim;

namespace {

// A fiber's saved execution context, and the two operations on it. On x86-64 a switch saves the callee-saved registers
// and the SSE/x87 control words on the old stack and loads them from the new one: no system call, where glibc's
// swapcontext makes one (its signal mask) at every switch, which was about 40% of the shim's run time. Elsewhere,
// ucontext.
#if defined(__x86_64__)
struct Context {
  void* stack_pointer = nullptr;
};

extern "C" void cuda_sim_switch_stack(void** save_stack_pointer, void* load_stack_pointer);
asm(R"(
  .text
  .p2align 4
  .hidden cuda_sim_switch_stack
  .globl cuda_sim_switch_stack
  .type cuda_sim_switch_stack, @function
cuda_sim_switch_stack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size cuda_sim_switch_stack, .-cuda_sim_switch_stack
)");

void switch_context(Context& save, Context& load) { cuda_sim_switch_stack(&save.stack_pointer, load.stack_pointer); }

// A context that starts `entry` (which never returns) on the stack [stack, stack + bytes): the frame the switch pops,
// with `entry` as its return address, placed so that entry starts with the stack aligned as after a call.
void start_context(Context& context, void* stack, size_t bytes, void (*entry)()) {
  auto top = (reinterpret_cast<uintptr_t>(stack) + bytes) & ~uintptr_t{15};
  auto* frame = reinterpret_cast<uint64_t*>(top - 16);  // 16-byte aligned: entry's stack pointer ends in 8
  frame[0] = reinterpret_cast<uint64_t>(entry);
  for (int i = 1; i <= 6; ++i) frame[-i] = 0;  // rbp, rbx, r12 ... r15
  uint32_t control[2];
  asm volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(control[0]), "=m"(control[1]));
  std::memcpy(&frame[-7], control, sizeof(control));
  context.stack_pointer = &frame[-7];
}
#else
struct Context {
  Context context;
};

void switch_context(Context& save, Context& load) { swapcontext(&save.context, &load.context); }

void start_context(Context& context, void* stack, size_t bytes, void (*entry)()) {
  getcontext(&context.context);
  context.context.uc_stack.ss_sp = stack;
  context.context.uc_stack.ss_size = bytes;
  context.context.uc_link = nullptr;
  makecontext(&context.context, entry, 0);
}
#endif

}  // namespace

enum class Schedule : int { Ascending = 0, Descending = 1, Interleaved = 2, Random = 3 };

namespace {

constexpr size_t kStackBytes = 256 * 1024;
constexpr unsigned char kPoison = 0xff;  // all bits set: NaN in float64, float32, float16 and bfloat16

struct Settings {
  Schedule schedule = Schedule::Ascending;
  uint64_t seed = 0;
  unsigned int grid_cap = 0;  // 0: no cap
  bool poison = true;
};

enum class State { Runnable, AtBarrier, AtWarpCall, Exited };

// A cp.async copy not yet landed: its 16 bytes (read at issue: kernels never write global memory they copy from).
struct PendingCopy {
  unsigned char* shared;
  unsigned char bytes[16];
};

struct Fiber {
  Context context;
  void* stack = nullptr;
  State state = State::Runnable;
  const char* barrier_file = nullptr;
  int barrier_line = 0;
  WarpCall* warp_call = nullptr;
  std::vector<PendingCopy> pending_copies;  // in issue order
  std::vector<size_t> group_ends;           // committed groups: pending_copies[previous end, end)
};

struct Launch {
  std::vector<Fiber> fibers;
  Context scheduler;
  const std::function<void()>* body = nullptr;
  std::vector<unsigned char> dynamic_shared;
  unsigned int current = 0;
  std::string error;
  std::mt19937_64 random;
#ifdef CUDA_SIM_ASAN
  void* scheduler_fake_stack = nullptr;
  const void* scheduler_stack_bottom = nullptr;  // the thread's own stack, where the scheduler runs
  size_t scheduler_stack_size = 0;
#endif
};

Settings settings;
Launch* active = nullptr;
std::mutex launch_mutex;
unsigned int last_requested_blocks = 0;  // by the most recent launch, before the grid cap

// A zero-initialised thread_local of this library: touching it makes sure this thread's TLS block for the library
// exists before it is poisoned (see poison_static_shared).
thread_local volatile char tls_anchor;

struct TlsBlock {
  unsigned char* start = nullptr;
  size_t initialised = 0;  // .tdata, left alone
  size_t size = 0;
};

// This library's TLS block in the calling thread: the kernels' `__shared__` arrays (static thread_local).
TlsBlock this_library_tls() {
  Dl_info info{};
  dladdr(reinterpret_cast<void*>(&this_library_tls), &info);
  struct Query {
    void* base;
    TlsBlock block;
  } query{info.dli_fbase, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* module, size_t, void* data) {
        auto* q = static_cast<Query*>(data);
        if (reinterpret_cast<void*>(module->dlpi_addr) != q->base) return 0;
        for (int i = 0; i < module->dlpi_phnum; ++i) {
          const auto& header = module->dlpi_phdr[i];
          if (header.p_type != PT_TLS) continue;
          q->block = {static_cast<unsigned char*>(module->dlpi_tls_data), header.p_filesz, header.p_memsz};
        }
        return 1;
      },
      &query);
  return query.block;
}

void poison_static_shared() {
  tls_anchor = 1;
  const TlsBlock block = this_library_tls();
  if (block.start == nullptr) throw std::runtime_error("cuda_sim: this library's TLS block was not found");
  std::memset(block.start + block.initialised, kPoison, block.size - block.initialised);
}

void switch_to_fiber(Launch& l, unsigned int t) {
  Fiber& f = l.fibers[t];
  l.current = t;
  thread_index = {t, 0, 0};
#ifdef CUDA_SIM_ASAN
  __sanitizer_start_switch_fiber(&l.scheduler_fake_stack, f.stack, kStackBytes);
#endif
  switch_context(l.scheduler, f.context);
#ifdef CUDA_SIM_ASAN
  __sanitizer_finish_switch_fiber(l.scheduler_fake_stack, nullptr, nullptr);
#endif
}

// From a fiber: back to the scheduler, which resumes it later (or never, after an error).
void yield_to_scheduler(Launch& l) {
  Fiber& f = l.fibers[l.current];
#ifdef CUDA_SIM_ASAN
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, l.scheduler_stack_bottom, l.scheduler_stack_size);
#endif
  switch_context(f.context, l.scheduler);
#ifdef CUDA_SIM_ASAN
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
}

void fiber_entry() {
  Launch& l = *active;
#ifdef CUDA_SIM_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &l.scheduler_stack_bottom, &l.scheduler_stack_size);
#endif
  (*l.body)();
  l.fibers[l.current].state = State::Exited;
#ifdef CUDA_SIM_ASAN
  __sanitizer_start_switch_fiber(nullptr, l.scheduler_stack_bottom, l.scheduler_stack_size);  // this stack is done
#endif
  switch_context(l.fibers[l.current].context, l.scheduler);  // never resumed
}

// The order in which the threads in `ready` run until their next synchronisation.
void order(Launch& l, std::vector<unsigned int>& ready) {
  switch (settings.schedule) {
    case Schedule::Ascending:
      std::sort(ready.begin(), ready.end());
      break;
    case Schedule::Descending:
      std::sort(ready.begin(), ready.end(), std::greater<>());
      break;
    case Schedule::Interleaved:  // lane 0 of every warp, then lane 1 of every warp, ...
      std::sort(ready.begin(), ready.end(), [](unsigned int a, unsigned int b) {
        return std::make_pair(a % 32, a / 32) < std::make_pair(b % 32, b / 32);
      });
      break;
    case Schedule::Random:
      std::shuffle(ready.begin(), ready.end(), l.random);
      break;
  }
}

std::string describe(const char* file, int line) {
  std::ostringstream out;
  out << file << ":" << line;
  return out.str();
}

// How many lanes of the warp starting at thread warp0 wait at a warp collective.
unsigned int lanes_at_warp_call(const Launch& l, unsigned int warp0) {
  unsigned int waiting = 0;
  for (unsigned int t = warp0; t < warp0 + 32; ++t) waiting += l.fibers[t].state == State::AtWarpCall;
  return waiting;
}

// Runs the collective all 32 lanes of the warp at warp0 wait at and makes them runnable; false (with l.error set)
// when the lanes wait at different calls or pass different arguments.
bool execute_warp_call(Launch& l, unsigned int warp0) {
  WarpCall* calls[32];
  const WarpCall& first = *l.fibers[warp0].warp_call;
  for (unsigned int lane = 0; lane < 32; ++lane) {
    const WarpCall& call = *l.fibers[warp0 + lane].warp_call;
    calls[lane] = l.fibers[warp0 + lane].warp_call;
    if (call.execute != first.execute || call.line != first.line || std::strcmp(call.file, first.file) != 0) {
      l.error = "different warp collectives in warp " + std::to_string(warp0 / 32) + ": " +
                describe(first.file, first.line) + " and " + describe(call.file, call.line);
      return false;
    }
    if (call.memory != first.memory || call.ldm != first.ldm || call.layout != first.layout) {
      l.error = "warp collective at " + describe(call.file, call.line) + ": lane " + std::to_string(lane) +
                " passes another pointer, ldm or layout than lane 0";
      return false;
    }
  }
  first.execute(calls);
  for (unsigned int t = warp0; t < warp0 + 32; ++t) l.fibers[t].state = State::Runnable;
  return true;
}

// Once no thread can run: a warp with some lanes at a collective and the others elsewhere can never complete it.
bool check_no_divergent_warp_call(Launch& l) {
  for (unsigned int warp0 = 0; warp0 < l.fibers.size(); warp0 += 32) {
    const unsigned int waiting = lanes_at_warp_call(l, warp0);
    if (waiting == 0) continue;
    unsigned int first = warp0;
    while (l.fibers[first].state != State::AtWarpCall) ++first;
    const WarpCall& call = *l.fibers[first].warp_call;
    l.error = "divergent warp collective: " + std::to_string(waiting) + " of the 32 lanes of warp " +
              std::to_string(warp0 / 32) + " wait at " + describe(call.file, call.line) +
              ", the others are elsewhere (a barrier, exited)";
    return false;
  }
  return true;
}

// Where a warp goes on after its collective completes: ascending and descending let it run ahead of the other warps
// (to its next barrier or collective) before they resume; interleaved keeps all warps in step; random puts each lane
// anywhere in the queue.
void requeue_warp(Launch& l, unsigned int warp0, std::deque<unsigned int>& queue) {
  std::vector<unsigned int> lanes(32);
  std::iota(lanes.begin(), lanes.end(), warp0);
  order(l, lanes);
  switch (settings.schedule) {
    case Schedule::Ascending:
    case Schedule::Descending:
      queue.insert(queue.begin(), lanes.begin(), lanes.end());
      break;
    case Schedule::Interleaved:
      queue.insert(queue.end(), lanes.begin(), lanes.end());
      break;
    case Schedule::Random:
      for (unsigned int t : lanes) {
        queue.insert(queue.begin() + static_cast<std::ptrdiff_t>(l.random() % (queue.size() + 1)), t);
      }
      break;
  }
}

// Releases the barrier if every live thread waits at the same one; else records the error.
std::vector<unsigned int> release_barrier(Launch& l) {
  std::vector<unsigned int> waiting, exited;
  for (unsigned int t = 0; t < l.fibers.size(); ++t) {
    if (l.fibers[t].state == State::AtBarrier) waiting.push_back(t);
    if (l.fibers[t].state == State::Exited) exited.push_back(t);
  }
  const Fiber& first = l.fibers[waiting.front()];
  if (!exited.empty()) {
    l.error = "divergent barrier: " + std::to_string(waiting.size()) + " threads (first " +
              std::to_string(waiting.front()) + ") wait at __syncthreads() at " +
              describe(first.barrier_file, first.barrier_line) + " while " + std::to_string(exited.size()) +
              " threads (first " + std::to_string(exited.front()) + ") have exited";
    return {};
  }
  for (unsigned int t : waiting) {
    const Fiber& f = l.fibers[t];
    if (f.barrier_line != first.barrier_line || std::strcmp(f.barrier_file, first.barrier_file) != 0) {
      l.error = "different __syncthreads: thread " + std::to_string(waiting.front()) + " waits at " +
                describe(first.barrier_file, first.barrier_line) + ", thread " + std::to_string(t) + " at " +
                describe(f.barrier_file, f.barrier_line);
      return {};
    }
  }
  for (unsigned int t : waiting) l.fibers[t].state = State::Runnable;
  return waiting;
}

// Runs one block to completion; false (with l.error set) on a synchronisation error.
bool run_block(Launch& l) {
  const unsigned int threads = static_cast<unsigned int>(l.fibers.size());
  for (unsigned int t = 0; t < threads; ++t) {
    Fiber& f = l.fibers[t];
#ifdef CUDA_SIM_ASAN
    __asan_unpoison_memory_region(f.stack, kStackBytes);  // frames an earlier, abandoned block left poisoned
#endif
    start_context(f.context, f.stack, kStackBytes, fiber_entry);
    f.state = State::Runnable;
    f.pending_copies.clear();
    f.group_ends.clear();
  }
  std::vector<unsigned int> ready(threads);
  std::iota(ready.begin(), ready.end(), 0u);
  for (;;) {
    order(l, ready);
    std::deque<unsigned int> queue(ready.begin(), ready.end());
    while (!queue.empty()) {
      const unsigned int t = queue.front();
      queue.pop_front();
      switch_to_fiber(l, t);
      if (!l.error.empty()) return false;
      const unsigned int warp0 = t / 32 * 32;
      if (l.fibers[t].state == State::AtWarpCall && lanes_at_warp_call(l, warp0) == 32) {
        if (!execute_warp_call(l, warp0)) return false;
        requeue_warp(l, warp0, queue);
      }
    }
    if (!check_no_divergent_warp_call(l)) return false;
    const bool all_exited = std::all_of(l.fibers.begin(), l.fibers.end(),
                                        [](const Fiber& f) { return f.state == State::Exited; });
    if (all_exited) return true;
    ready = release_barrier(l);
    if (!l.error.empty()) return false;
  }
}

struct Stacks {
  std::vector<void*> stacks;
  ~Stacks() {
    for (void* s : stacks) munmap(s, kStackBytes);
  }
  void reserve(size_t count) {
    while (stacks.size() < count) {
      void* s = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (s == MAP_FAILED) throw std::runtime_error("cuda_sim: cannot allocate a fiber stack");
      stacks.push_back(s);
    }
  }
};

Stacks stacks;

}  // namespace

void sync_threads(const char* file, int line) {
  Launch& l = *active;
  Fiber& f = l.fibers[l.current];
  f.state = State::AtBarrier;
  f.barrier_file = file;
  f.barrier_line = line;
  yield_to_scheduler(l);
}

void warp_collective(WarpCall& call) {
  Launch& l = *active;
  Fiber& f = l.fibers[l.current];
  f.state = State::AtWarpCall;
  f.warp_call = &call;
  yield_to_scheduler(l);
}

unsigned char* dynamic_shared() { return active->dynamic_shared.data(); }

namespace {

// Records the running thread's error and parks it as exited (it cannot go on); the scheduler reports the error.
void fail_thread(const char* what, const std::source_location& where, const std::string& problem) {
  Launch& l = *active;
  l.error = std::string(what) + " at " + describe(where.file_name(), static_cast<int>(where.line())) + ": " + problem;
  l.fibers[l.current].state = State::Exited;
  yield_to_scheduler(l);
}

bool aligned(const void* pointer, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(pointer) % bytes == 0; }

// Whether copies land when issued (see cuda_sim.h); otherwise at the wait_group that releases them.
bool copies_land_at_issue() {
  return settings.schedule == Schedule::Ascending || settings.schedule == Schedule::Interleaved;
}

}  // namespace

void check_matrix_pointer(const void* pointer, unsigned int ldm, size_t element_bytes, const char* what,
                          const std::source_location& where) {
  std::string problem;
  if (!aligned(pointer, 32)) problem = "a pointer that is not 256-bit aligned";
  if ((ldm * element_bytes) % 16 != 0) problem = "ldm " + std::to_string(ldm) + " (not a multiple of 16 bytes)";
  if (!problem.empty()) fail_thread(what, where, problem);
}

void async_copy_16(void* shared, const void* global, bool valid, const std::source_location& where) {
  if (!aligned(shared, 16) || (valid && !aligned(global, 16))) {
    fail_thread("cp.async", where, "an address that is not 16-byte aligned");
    return;
  }
  PendingCopy copy{static_cast<unsigned char*>(shared), {}};
  if (valid) std::memcpy(copy.bytes, global, sizeof(copy.bytes));  // else the zero fill
  if (copies_land_at_issue()) {
    std::memcpy(copy.shared, copy.bytes, sizeof(copy.bytes));
    return;
  }
  active->fibers[active->current].pending_copies.push_back(copy);
}

void async_commit() {
  Fiber& f = active->fibers[active->current];
  f.group_ends.push_back(f.pending_copies.size());
}

void async_wait(int pending) {
  Fiber& f = active->fibers[active->current];
  const auto groups = static_cast<int>(f.group_ends.size());
  if (groups <= pending) return;
  const size_t landed = f.group_ends[groups - pending - 1];  // the oldest groups, up to the `pending` newest
  for (size_t i = 0; i < landed; ++i) {
    std::memcpy(f.pending_copies[i].shared, f.pending_copies[i].bytes, sizeof(f.pending_copies[i].bytes));
  }
  f.pending_copies.erase(f.pending_copies.begin(), f.pending_copies.begin() + static_cast<std::ptrdiff_t>(landed));
  f.group_ends.erase(f.group_ends.begin(), f.group_ends.begin() + (groups - pending));
  for (size_t& end : f.group_ends) end -= landed;
}

namespace {
// ldmatrix .x4 over the warp: lane l's register i is the 4 bytes at 4 (l % 4) of row l / 4 of matrix i, whose address
// lane 8 i + l / 4 gave.
void execute_ldmatrix_x4(WarpCall* const* lanes) {
  for (int lane = 0; lane < 32; ++lane) {
    auto* registers = static_cast<uint32_t*>(const_cast<void*>(lanes[lane]->fragment));
    for (int i = 0; i < 4; ++i) {
      const auto* row = static_cast<const unsigned char*>(lanes[8 * i + lane / 4]->second);
      std::memcpy(&registers[i], row + 4 * (lane % 4), sizeof(uint32_t));
    }
  }
}

// .trans: lane l's register i holds the 2 bytes at 2 (l / 4) of rows 2 (l % 4) (low half) and 2 (l % 4) + 1 of
// matrix i, whose addresses lanes 8 i + 2 (l % 4) and the next gave.
void execute_ldmatrix_x4_trans(WarpCall* const* lanes) {
  for (int lane = 0; lane < 32; ++lane) {
    auto* registers = static_cast<uint32_t*>(const_cast<void*>(lanes[lane]->fragment));
    for (int i = 0; i < 4; ++i) {
      uint16_t halves[2];
      for (int half = 0; half < 2; ++half) {
        const auto* row = static_cast<const unsigned char*>(lanes[8 * i + 2 * (lane % 4) + half]->second);
        std::memcpy(&halves[half], row + 2 * (lane / 4), sizeof(uint16_t));
      }
      registers[i] = uint32_t{halves[0]} | uint32_t{halves[1]} << 16;
    }
  }
}

void ldmatrix_collective(void (*execute)(WarpCall* const* lanes), uint32_t* registers, const void* row,
                         const std::source_location& where) {
  if (!aligned(row, 16)) {
    fail_thread("ldmatrix", where, "a row address that is not 16-byte aligned");
    return;
  }
  WarpCall call{};
  call.execute = execute;
  call.fragment = registers;
  call.second = row;
  call.file = where.file_name();
  call.line = where.line();
  warp_collective(call);
}
}  // namespace

void ldmatrix_x4(uint32_t* registers, const void* row, const std::source_location& where) {
  ldmatrix_collective(&execute_ldmatrix_x4, registers, row, where);
}

void ldmatrix_x4_trans(uint32_t* registers, const void* row, const std::source_location& where) {
  ldmatrix_collective(&execute_ldmatrix_x4_trans, registers, row, where);
}

uint32_t cvt_rna_tf32(uint32_t bits) {
  constexpr uint32_t kExponent = 0x7F800000u, kMantissa = 0x007FFFFFu, kDropped = 0x1FFFu;
  if ((bits & kExponent) == kExponent && (bits & kMantissa) != 0) return (bits | 0x7FC00000u) & ~kDropped;  // NaN
  // Sign and magnitude: half a TF32 unit added to the magnitude carries into the kept bits from the halfway point
  // up, which is nearest with ties away from zero (and overflows into the exponent, up to infinity, where it should).
  return (bits + (kDropped + 1) / 2) & ~kDropped;
}

namespace {
float float_of_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// D = A B + C for mma.m16n8k8 .tf32 over the warp's fragments (layout in cuda_sim.h).
void execute_mma_m16n8k8_tf32(WarpCall* const* lanes) {
  float a[16][8], b[8][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    const auto* a_registers = static_cast<const uint32_t*>(lanes[lane]->fragment);
    const auto* b_registers = static_cast<const uint32_t*>(lanes[lane]->second);
    for (int r = 0; r < 4; ++r) a[g + 8 * (r % 2)][t + 4 * (r / 2)] = float_of_bits(a_registers[r]);
    for (int r = 0; r < 2; ++r) b[t + 4 * r][g] = float_of_bits(b_registers[r]);
  }
  detail::multiply_accumulate(lanes, a, b);
}
}  // namespace

void mma_m16n8k8_tf32(float* d, const uint32_t* a, const uint32_t* b, const float* c,
                      const std::source_location& where) {
  for (const uint32_t operand : {a[0], a[1], a[2], a[3], b[0], b[1]}) {
    if (operand != cvt_rna_tf32(operand)) {
      fail_thread("mma.sync.m16n8k8.tf32", where, "an operand that is not TF32 (no cvt.rna.tf32.f32)");
      return;
    }
  }
  mma_collective(&execute_mma_m16n8k8_tf32, d, a, b, c, where);
}

void run_grid(unsigned int blocks, unsigned int threads, size_t shared_bytes, const std::function<void()>& body) {
  std::lock_guard<std::mutex> lock(launch_mutex);
  last_requested_blocks = blocks;
  Launch l;
  l.body = &body;
  l.fibers.resize(threads);
  l.random.seed(settings.seed);
  stacks.reserve(threads);
  for (unsigned int t = 0; t < threads; ++t) l.fibers[t].stack = stacks.stacks[t];
  const unsigned int grid = settings.grid_cap > 0 ? std::min(blocks, settings.grid_cap) : blocks;
  grid_dim = {grid, 1, 1};
  block_dim = {threads, 1, 1};
  active = &l;
  for (unsigned int b = 0; b < grid; ++b) {
    block_index = {b, 0, 0};
    l.dynamic_shared.assign(shared_bytes, settings.poison ? kPoison : 0);
    if (settings.poison) poison_static_shared();
    const bool ok = run_block(l) && l.error.empty();
    if (!ok) {
      active = nullptr;
      throw std::runtime_error("cuda_sim: block " + std::to_string(b) + ": " + l.error);
    }
  }
  active = nullptr;
}

}  // namespace cuda_sim

// The blocks the most recent launch asked for, before the grid cap: what its grid would be on a GPU.
extern "C" unsigned int cuda_sim_last_requested_blocks() {
  std::lock_guard<std::mutex> lock(cuda_sim::launch_mutex);
  return cuda_sim::last_requested_blocks;
}

// Set from Python (ctypes) before the kernels run: schedule (0 ascending, 1 descending, 2 interleaved warps, 3 random),
// the random schedule's seed, the grid cap (0 for none) and whether shared memory is poisoned.
extern "C" void cuda_sim_configure(int schedule, uint64_t seed, unsigned int grid_cap, int poison) {
  cuda_sim::settings = {static_cast<cuda_sim::Schedule>(schedule), seed, grid_cap, poison != 0};
}
