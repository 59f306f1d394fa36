from py_runtime.host.cli import main

raise SystemExit(main())
