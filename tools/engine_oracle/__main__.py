from gpustack_k3.oracle.judge import main

raise SystemExit(main())
