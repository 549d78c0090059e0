"""Training at scale: memory, traffic, FLOPs and step time of DP x TP x PP x CP x EP with ZeRO / FSDP.

Modules (each documents its formulas and their sources):

``layout``       the parallel layout (dp, tp, pp, cp, ep, virtual stages, sequence parallelism) and its checks
``flops``        per-layer forward/backward FLOPs; 6ND plus attention per step
``memory``       parameters, gradients and optimizer states per GPU under ZeRO 0-3 / FSDP
``activations``  activation memory per layer (Korthikanti et al. 2022) and per GPU under the pipeline schedule
``traffic``      bytes per step per parallel dimension and collective
``kernels``      bytes of the memory-bound kernels per layer (norms, softmax, dropout, residual adds, ...) and of
                 the optimizer step
``step``         step time and MFU on a ``ringlab.topology`` cluster
``plan``         :func:`~ringlab.calc.training.plan.train_plan`: all of the above for one configuration
                 (what ``ringlab calc train`` prints)

Builds on the per-layer model and formulas of ``ringlab.calc`` (params, comm, kvcache, pipeline) and the
byte counts of ``ringlab.collectives``; ``step`` imports ``ringlab.topology`` inside its functions.
Not imported by ``import ringlab``.
"""
