"""A small text classifier for the agent-loop guide (docs/guides/agent-loop.md): multinomial
Naive Bayes on synthetic documents, standard library only.

    python3 nb.py ALPHA NGRAM SEED

Two classes share one unigram distribution; each has its own successor word, so bigrams carry
the class. Per training chunk it appends {step, train_docs, dev_acc, dev_nll} to
$ORBIT_METRICS, at the end {test_acc, test_nll}, and writes $ORBIT_OUTPUT/result.json. Two
failures are built in, as an agent meets them:
- ALPHA=0 takes log(0) for a feature never seen with a class: seed 1's test set has a word
  no training document has, so only that seed fails at unigrams; at bigrams every seed does.
- ALPHA>=5 with NGRAM=2 builds a dense table of every bigram (about 300 MiB): killed under
  --mem 0.25, fine at --mem 1.
"""

import itertools
import json
import math
import os
import random
import sys

WORDS = [f"w{i}" for i in range(40)]


def document(rng: random.Random, label: int, novel: float) -> list[str]:
    out = [rng.choice(WORDS)]
    for _ in range(29):
        if rng.random() < novel:
            out.append("unseen")
        elif rng.random() < 0.08 and out[-1] in WORDS:
            out.append(WORDS[(WORDS.index(out[-1]) + 1 + 7 * label) % len(WORDS)])
        else:
            out.append(rng.choice(WORDS))
    return out


def features(doc: list[str], ngram: int) -> list[str]:
    return doc if ngram == 1 else [f"{a} {b}" for a, b in itertools.pairwise(doc)]


def main() -> None:
    alpha, ngram, seed = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    dense = None
    if alpha >= 5 and ngram == 2:
        dense = b"\x01" * (300 << 20)  # the dense table path
    counts = [{}, {}]
    totals = [0, 0]
    vocab = len(WORDS) ** ngram

    def log_prob(feats: list[str], label: int) -> float:
        denominator = totals[label] + alpha * vocab
        return sum(math.log((counts[label].get(f, 0) + alpha) / denominator) for f in feats)

    def evaluate(docs: list[tuple[list[str], int]]) -> tuple[float, float]:
        right, nll = 0, 0.0
        for doc, label in docs:
            scores = [log_prob(features(doc, ngram), c) for c in (0, 1)]
            top = max(scores)
            norm = top + math.log(sum(math.exp(s - top) for s in scores))
            right += scores.index(top) == label
            nll -= scores[label] - norm
        return right / len(docs), nll / len(docs)

    dev = [(document(rng, y, 0.0), y) for y in (0, 1) for _ in range(100)]
    test_rng = random.Random(1000 + seed)
    novel = 0.002 if seed == 1 else 0.0
    test = [(document(test_rng, y, novel), y) for y in (0, 1) for _ in range(100)]
    with open(os.environ["ORBIT_METRICS"], "a") as metrics:
        for step in range(1, 6):
            for _ in range(120):
                label = rng.randrange(2)
                for f in features(document(rng, label, 0.0), ngram):
                    counts[label][f] = counts[label].get(f, 0) + 1
                    totals[label] += 1
            dev_acc, dev_nll = evaluate(dev)
            row = {"step": step, "train_docs": 120 * step, "dev_acc": dev_acc, "dev_nll": dev_nll}
            metrics.write(json.dumps(row) + "\n")
            metrics.flush()
        test_acc, test_nll = evaluate(test)
        metrics.write(json.dumps({"test_acc": test_acc, "test_nll": test_nll}) + "\n")
    with open(os.path.join(os.environ["ORBIT_OUTPUT"], "result.json"), "w") as out:
        json.dump({"test_acc": test_acc, "dense": dense is not None}, out)
    print(f"alpha={alpha} ngram={ngram} seed={seed}: test_acc {test_acc:.3f}")


if __name__ == "__main__":
    main()
