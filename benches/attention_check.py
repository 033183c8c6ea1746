"""Cross-check `condenser analyze attention` with transformers (output_attentions=True).

python3 benches/attention_check.py MODEL_DIR TEXTS.parquet COLUMN N CSV_FROM_CONDENSER
Prints the per-layer mean entropy of [CLS]'s attention and the largest difference to the CSV.
"""
import sys, math, csv
import torch, pyarrow.parquet as pq
from transformers import AutoModel, AutoTokenizer

model_dir, path, column, n, csv_path = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
texts = [t for t in pq.read_table(path, columns=[column]).column(column).to_pylist() if t and t.strip()][:n]
tok = AutoTokenizer.from_pretrained(model_dir)
model = AutoModel.from_pretrained(model_dir, attn_implementation="eager").eval()
sums, count = None, 0
with torch.no_grad():
    for i in range(0, len(texts), 32):
        enc = tok(texts[i:i + 32], padding=True, truncation=True, max_length=256, return_tensors="pt")
        att = model(**enc, output_attentions=True).attentions
        ent = [-(a[:, :, 0, :] * torch.log(a[:, :, 0, :].double() + 1e-30)).sum(-1).sum().item() for a in att]
        sums = ent if sums is None else [s + e for s, e in zip(sums, ent)]
        count += enc["input_ids"].shape[0] * att[0].shape[1]
ref = [s / count for s in sums]
rows = list(csv.reader(open(csv_path)))
col = rows[0].index(rows[0][1])
ours = [float(r[col]) for r in rows[1:]]
for l, (r, o) in enumerate(zip(ref, ours)):
    print(f"layer {l + 1}: transformers {r:.4f} condenser {o:.4f}")
print("max abs difference", max(abs(r - o) for r, o in zip(ref, ours)))
