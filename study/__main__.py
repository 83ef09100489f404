from study.cli import main

raise SystemExit(main())
