{# nothing here #}
