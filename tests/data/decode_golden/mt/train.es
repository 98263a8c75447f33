laqué di tarsé laqué.
losla brelos la el.
tarçi elbre bre çisé.
ñosé tar ñosé çitar.
bre ñolos targa quéño los séel.
sé elño la ño.
çiqué malos ño ma çila.
ga latar di sé gadi di.
re eltar bre la.
di qué di di la diçi.
ñotar los latar labre lalos bresé.
laño el re.
sé ñoel gaqué laga bre.
matar ma ño.
çi sé brebre.
bre mael çi lostar losma reño.
la losdi rela.
ñola gatar çila rega.
diel tar ma.
la tarre reçi la di.
