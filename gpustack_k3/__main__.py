from gpustack_k3.cli.main import main

main()
