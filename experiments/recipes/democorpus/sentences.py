"""Texts of the demo corpus: everyday sentences for ASR (English, Spanish) and first-person
sentences with Spanish references in MuST-SHE format (category 1F/1M: the speaker's own gender
decides the gender-marked words of the translation)."""

from __future__ import annotations

from dataclasses import dataclass

ASR_SENTENCES = {
    "en": [
        "The train to the city leaves every morning at seven.",
        "Please close the window before it starts to rain.",
        "We planted tomatoes and beans in the garden this spring.",
        "The museum is open on weekends until six in the evening.",
        "My brother bought a new bicycle last week.",
        "Could you send me the report before the meeting tomorrow?",
        "The children played football in the park after school.",
        "She forgot her umbrella on the bus this morning.",
        "The library has thousands of books about history.",
        "Dinner will be ready in about twenty minutes.",
    ],
    "es": [
        "El tren a la ciudad sale todas las mañanas a las siete.",
        "Por favor, cierra la ventana antes de que empiece a llover.",
        "Este año plantamos tomates y judías en el jardín.",
        "El museo abre los fines de semana hasta las seis de la tarde.",
        "Mi hermano compró una bicicleta nueva la semana pasada.",
        "¿Puedes enviarme el informe antes de la reunión de mañana?",
        "Los niños jugaron al fútbol en el parque después de clase.",
        "Ella olvidó su paraguas en el autobús esta mañana.",
        "La biblioteca tiene miles de libros de historia.",
        "La cena estará lista en unos veinte minutos.",
    ],
}


@dataclass(frozen=True)
class GenderedSentence:
    """A first-person English sentence and its Spanish translation in both genders.

    ``feminine`` and ``masculine`` are the references; ``terms`` lists the (feminine, masculine)
    word pairs that differ, in order of appearance.
    """

    source: str
    feminine: str
    masculine: str
    terms: tuple[tuple[str, str], ...]


MUSTSHE_SENTENCES = [
    GenderedSentence(
        "I was very tired after the long trip.",
        "Estaba muy cansada después del largo viaje.",
        "Estaba muy cansado después del largo viaje.",
        (("cansada", "cansado"),),
    ),
    GenderedSentence(
        "I am so happy to be here with you today.",
        "Estoy muy contenta de estar aquí con ustedes hoy.",
        "Estoy muy contento de estar aquí con ustedes hoy.",
        (("contenta", "contento"),),
    ),
    GenderedSentence(
        "When I was young, I was a very curious child.",
        "Cuando era joven, era una niña muy curiosa.",
        "Cuando era joven, era un niño muy curioso.",
        (("una", "un"), ("niña", "niño"), ("curiosa", "curioso")),
    ),
    GenderedSentence(
        "I was born in a small town by the sea, and I am the first in my family to travel.",
        "Nací en un pueblo pequeño junto al mar, y soy la primera de mi familia en viajar.",
        "Nací en un pueblo pequeño junto al mar, y soy el primero de mi familia en viajar.",
        (("la", "el"), ("primera", "primero")),
    ),
    GenderedSentence(
        "I am a teacher, and I love my students.",
        "Soy profesora y quiero a mis estudiantes.",
        "Soy profesor y quiero a mis estudiantes.",
        (("profesora", "profesor"),),
    ),
    GenderedSentence(
        "I was surprised by the results.",
        "Me quedé sorprendida por los resultados.",
        "Me quedé sorprendido por los resultados.",
        (("sorprendida", "sorprendido"),),
    ),
    GenderedSentence(
        "I am convinced that we can do better.",
        "Estoy convencida de que podemos hacerlo mejor.",
        "Estoy convencido de que podemos hacerlo mejor.",
        (("convencida", "convencido"),),
    ),
    GenderedSentence(
        "I was the only engineer in the room.",
        "Yo era la única ingeniera en la sala.",
        "Yo era el único ingeniero en la sala.",
        (("la", "el"), ("única", "único"), ("ingeniera", "ingeniero")),
    ),
    GenderedSentence(
        "I am ready to start the new project.",
        "Estoy lista para empezar el nuevo proyecto.",
        "Estoy listo para empezar el nuevo proyecto.",
        (("lista", "listo"),),
    ),
    GenderedSentence("I felt lonely in the new city.", "Me sentí sola en la nueva ciudad.", "Me sentí solo en la nueva ciudad.", (("sola", "solo"),)),
]
MUSTSHE_TARGET = "es"
