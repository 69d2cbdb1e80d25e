from tools.engine_oracle.oracle import main

raise SystemExit(main())
