/* C99 complex numbers are not modelled by the frontend; the header only has to parse. */
