// A node workload: a hot JavaScript function the JIT compiles (its frames are named only
// through node's perf map, `--perf-basic-prof`), called from a loop. argv[2]: rounds.
function collatzLength(n) {
  let steps = 0;
  while (n !== 1) {
    n = n % 2 === 0 ? n / 2 : 3 * n + 1;
    steps++;
  }
  return steps;
}

function longestUpTo(limit) {
  let best = 0;
  for (let i = 1; i < limit; i++) {
    const l = collatzLength(i);
    if (l > best) best = l;
  }
  return best;
}

const rounds = Number(process.argv[2] || 3);
let sum = 0;
for (let r = 0; r < rounds; r++) sum += longestUpTo(300000);
console.log(sum);
