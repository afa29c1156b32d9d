// The triangle family's name lookup and argument checks, shared by the CPU and
// CUDA entry points (csrc/shared/triangle.cpp).
#pragma once
#include "internal.h"
#include "tinycuda/triangle.h"

// The op's name as its schema spells it ("triu"); "triangle" for an unknown op.
const char* triangle_name(int op);
tc_status triangle_check(const tc_triangle_params* p);

// diagonal where it matters: clamped to [-rows, cols] (past either end a row
// keeps all of its columns or none, the same as at the end), so that i +
// diagonal cannot overflow
inline int64_t triangle_diagonal(const tc_triangle_params* p) {
  return p->diagonal < -p->rows ? -p->rows : p->diagonal > p->cols ? p->cols : p->diagonal;
}

// The columns row i keeps, [begin, end): from i + diagonal on (triu), or up to
// and with it (tril), within [0, cols]; the others are zeros. diagonal: as
// triangle_diagonal gives it.
struct KeptColumns {
  int64_t begin, end;
};
TC_HD inline KeptColumns kept_columns(bool triu, int64_t i, int64_t cols, int64_t diagonal) {
  const int64_t edge = i + diagonal;
  auto clamp = [cols](int64_t j) { return j < 0 ? int64_t(0) : j > cols ? cols : j; };
  return triu ? KeptColumns{clamp(edge), cols} : KeptColumns{0, clamp(edge + 1)};
}
