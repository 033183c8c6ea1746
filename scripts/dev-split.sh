# Sourced by the issue-34 studies: the recipe's split of a development collection, so that every
# study scores on the same dev queries as recipes/retrieval-adaptation.toml and never on test.
# `dev_split COLLECTION` sets o (the study's folder), D (the collection), f (its dev folds), splits
# the judged queries in half by xxh3(query id, 0) and the train half into 3 folds, once.
C=target/release/condenser
M=datasets/model/all-MiniLM-L6-v2
dev_split() {
  o=out/dev34/$1
  D=datasets/data/$1
  f=$o/folds
  [ -d $o/data ] || $C split --retrieval $D --test-fraction 0.5 --seed 0 --out $o/data
  [ -d $f/fold-2 ] || $C split --retrieval $o/data --split train --folds 3 --seed 0 --out $f
}
