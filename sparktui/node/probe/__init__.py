"""The node probe: one JSON object per interval on stdout, until its channel closes.

Runs on a DGX Spark (or any Linux node) with nothing but the Python standard library; ``pynvml``
(package ``nvidia-ml-py``) is used when the node has it. It imports nothing of sparktui
outside this package, because the controller ships its text to the node as one script: ``main`` with the
modules it imports inlined once each (``sparktui.node.source("probe.main")``; how it is started:
``sparktui/remote/probe_runner.py``). One module a job: ``main`` (options, the sampling loop),
``sampler`` (one sample), ``host`` (memory, CPU), ``gpu`` / ``gpu_nvml`` / ``gpu_smi``, ``rdma``,
``processes``, ``containers``, ``engine_api``, ``channel`` (living and ending with the channel),
``files`` and ``problems`` (reading node files; why a value is null).

Cost on the node is kept low on purpose: it runs next to a serving model.
- No process is spawned per sample. /proc and /sys files stay open and are re-read with ``os.pread``
  at offset 0 (procfs/sysfs regenerate the text on a read at offset 0).
- The process list is rescanned every ``--proc-every`` seconds and only new PIDs' cmdlines are read.
- Containers come from the Docker socket every ``--docker-every`` seconds (the ``docker`` CLI only
  when the socket is not reachable, and then at most once a minute).
- Without NVML, ``nvidia-smi`` is started ONCE in its loop mode (``-lms``) and its lines are read as
  they come, instead of one ``nvidia-smi`` per sample.

Exit: with ``--until-stdin-closes`` (how sparktui starts it) the probe exits as soon as stdin reaches
EOF, i.e. when the SSH channel (or local pipe) that started it closes; a write to a closed stdout also
ends it, and on Linux it asks for SIGTERM when its parent dies. ``--count N`` stops after N samples.

Sample (``"v": 1``): ``seq``, ``mono`` (node monotonic s), ``wall`` (Unix s), ``host``, ``interval``,
``memory`` (unified memory, bytes), ``cpu``, ``gpu`` (NVML: also memory clock, max clocks, the raw
clock-event reason mask ``clock_event_reasons``, ``xid_errors`` from an Xid event set), ``rdma`` (raw
sysfs counters; data counters are octets/4 — the controller multiplies by 4), ``processes``,
``containers``, ``probe`` (own pid and CPU seconds), ``problems`` (path → reason for values that are
``null``; each said once), ``resolved`` (paths that read again; only when there are some), and with
``--engine-port`` (the head's probe) ``engine_api``: the engine's ``/health`` and the wanted families of
its ``/metrics`` as last read beside it (see ``EngineApiReader``).
"""
