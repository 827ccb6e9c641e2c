#!/bin/bash
# The diagnostic: every chunk_out program of an odd chunk reads the entry state of the even chunk before it.
set -e
f=kernels/cutile/chunk_out.py
sed -i 's/hT = _state_t(states, b, head0, chunk, p_tile, n,/hT = _state_t(states, b, head0, chunk - chunk % 2, p_tile, n,/' $f
sed -i 's/hT = _state_t(states, b, head, chunk, p_tile, n, BLOCK_P, BLOCK_N, STATES_T, state_latency)/hT = _state_t(states, b, head, chunk - chunk % 2, p_tile, n, BLOCK_P, BLOCK_N, STATES_T, state_latency)/' $f
test "$(grep -c 'chunk - chunk % 2' $f)" = 3
