"""A Transformer-base-sized pre-LN model (6+6 layers, d_model 512, 8 heads, d_ff 2048, vocabularies
of 8000) with seeded random weights, in tessel's nn.Transformer layout, for timing the pre-LN
path (bench/RESULTS.md). Usage: python3 tools/make_preln_base.py [OUT_DIR]"""
import sys, os, json, torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_golden as g
from safetensors.numpy import save_file
c = dict(d_model=512, heads=8, encoder_layers=6, decoder_layers=6, d_ff=2048,
         src_vocab=8000, tgt_vocab=8000, share_embeddings=False, tie_output=False,
         norm="pre", activation="relu", positions="sinusoidal", layer_norm_eps=1e-5,
         src_len=32, tgt_len=32, greedy_steps=32)
torch.manual_seed(3)
gen = torch.Generator().manual_seed(3)
m = g.Seq2Seq(c); g.perturb(m, gen); m.eval()
w = g.export_weights(m, c)
out = sys.argv[1] if len(sys.argv) > 1 else '/tmp/preln_base'; os.makedirs(out, exist_ok=True)
cfg = g.rust_config(c)
cfg.update(max_src_len=64, max_tgt_len=64)
json.dump(cfg, open(os.path.join(out, 'config.json'), 'w'), indent=2)
save_file(w, os.path.join(out, 'model.safetensors'))
print(cfg)
