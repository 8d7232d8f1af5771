def forgot_the_parameters(:
    pass
