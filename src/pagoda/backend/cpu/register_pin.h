// Keeps a register tile's reused operands in registers. GCC 12 folds a vector load into the instruction that uses
// it whenever it can, also for a value the tile uses several times: a prompt tile's activations were loaded again
// for each of its rows, and the int8 tiles' prepared row chunks again for each token, so the load ports and not the
// arithmetic set the tiles' pace (the 4 x 6 F16 tile: 28 loads a k-step for 24 FMAs; docs/PERFORMANCE.md, "prompt
// tiles that load each operand once"). An empty asm that takes the values as register operands makes each load
// happen once; it emits no instruction and changes no result.
#pragma once

namespace pagoda::cpu {

template <class V>
[[gnu::always_inline]] inline void keep_in_register(V& value) {
  asm("" : "+v"(value));
}

template <class... V>
[[gnu::always_inline]] inline void keep_in_registers(V&... values) {
  (keep_in_register(values), ...);
}

}  // namespace pagoda::cpu
