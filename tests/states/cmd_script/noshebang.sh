echo "no interpreter line"
