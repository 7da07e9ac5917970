#!/bin/bash
ids=$(python3 -c "print(','.join(str(100+i) for i in range(512)))")
for i in $(seq 1 $2); do
  for b in base steal; do
    /tmp/pagoda-$b generate --json --model $1 --threads 2 --ignore-eos --max-tokens 1 --prompt-ids $ids --max-model-len 600 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); print('$b', round(d['timings']['prompt_tokens_per_second'],2))"
  done
done
