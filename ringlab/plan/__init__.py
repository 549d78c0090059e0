"""Plan a job: search every training layout and serving configuration of a model on a cluster.

The calculators answer "how much memory and time does this layout take"; this package asks the inverse,
"which layout, and why". Every number it ranks by comes from them: training layouts from
:func:`ringlab.calc.training.plan.train_plan` (memory, traffic, step time and MFU of DP x TP x PP x CP x EP
with ZeRO / FSDP), serving configurations from :mod:`ringlab.serving`'s scheduler and the decode
roofline of :mod:`ringlab.calc.decode`.

Modules:

``space``      the search space of training layouts: degrees that divide the cluster and the model, each
               refusal counted with its reason; the brute-force enumeration the search is tested against
``train``      :func:`~ringlab.plan.train.plan_train`: best-first search with sound lower bounds, the
               binding constraint of each layout and why the next one down loses
``published``  layouts published for real runs (Llama 3 405B, Megatron's 1T, MT-NLG 530B, DeepSeek-V3),
               with their sources, and where the search ranks them
``serve``      :func:`~ringlab.plan.serve.plan_serve`: the cheapest serving configuration meeting an SLA
``design``     the design-interview prompt and its checker (``ringlab practice --design``)

Imports ``ringlab.calc`` and ``ringlab.serving`` (never ``viz``, ``check`` or the CLI); not imported by
``import ringlab``.
"""
