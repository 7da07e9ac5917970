#!/bin/bash
# usage: ab.sh MODEL N
for i in $(seq 1 $2); do
  for b in base steal; do
    /tmp/pagoda-$b generate --json --model $1 --threads 2 --ignore-eos --max-tokens 128 --prompt-ids 1 --max-model-len 200 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); t=d.get('timings',d); print('$b', round(t.get('decode_tokens_per_second', t.get('generation_tokens_per_second', 0)),2))" 2>/dev/null || echo "$b fail"
  done
done
