from grpo_ext.cli import main

raise SystemExit(main())
