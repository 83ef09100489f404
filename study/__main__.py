from study.core.cli import main

raise SystemExit(main())
