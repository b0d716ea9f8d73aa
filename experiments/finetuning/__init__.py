"""Gender-aware LoRA fine-tuning of Whisper (GRAFN §V; Boito et al. 2022's balance experiments):
speaker-disjoint training subsets at a chosen female share (:mod:`.subsets`), a Lightning module
with peft adapters (:mod:`.module`), a per-gender validation callback (:mod:`.tracking`), an
optional GRAFN front end (:mod:`.data`) and the run that ties them and saves the merged model
(:mod:`.run`); ``python -m experiments.finetune`` is its command line."""
